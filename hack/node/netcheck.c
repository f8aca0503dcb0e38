/* The dev cluster's network check, a static binary with no other file (image netcheck):
 *   netcheck serve PORT       answers each TCP connection with "<hostname> <peer address>\n"
 *   netcheck get IP PORT      connects, prints the answer; exit 1 when that fails in 10 s
 * hack/test-realnodes.sh runs it in pods on each real node. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int serve(int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY)};
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 16)) { perror("netcheck: listen"); return 1; }
    signal(SIGTERM, SIG_DFL);
    for (;;) {
        struct sockaddr_in peer;
        socklen_t len = sizeof peer;
        int c = accept(s, (struct sockaddr *)&peer, &len);
        if (c < 0) continue;
        char host[256] = "", line[512];
        gethostname(host, sizeof host - 1);
        int n = snprintf(line, sizeof line, "%s %s\n", host, inet_ntoa(peer.sin_addr));
        if (write(c, line, n) != n) perror("netcheck: write");
        close(c);
    }
}

static int get(const char *ip, int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) { fprintf(stderr, "netcheck: %s is not an IPv4 address\n", ip); return 2; }
    if (connect(s, (struct sockaddr *)&a, sizeof a)) { perror("netcheck: connect"); return 1; }
    char buf[512];
    ssize_t n = read(s, buf, sizeof buf - 1);
    if (n <= 0) { perror("netcheck: read"); return 1; }
    buf[n] = 0;
    fputs(buf, stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "serve")) return serve(atoi(argv[2]));
    if (argc == 4 && !strcmp(argv[1], "get")) return get(argv[2], atoi(argv[3]));
    if (argc == 2 && !strcmp(argv[1], "sleep")) { pause(); return 0; }
    fprintf(stderr, "usage: netcheck serve PORT | get IP PORT | sleep\n");
    return 2;
}
