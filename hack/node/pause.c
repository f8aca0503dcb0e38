/* The pod sandbox process of the dev cluster's real node: it holds the pod's namespaces open,
 * reaps zombies and exits on SIGINT/SIGTERM. Built statically by hack/realnode.sh into the
 * image kstack.local/pause, because no registry is reachable to pull one. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { _exit(sig == SIGTERM || sig == SIGINT ? 0 : 1); }

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction term = {.sa_handler = stop};
    struct sigaction child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    sigaction(SIGINT, &term, NULL);
    sigaction(SIGTERM, &term, NULL);
    sigaction(SIGCHLD, &child, NULL);
    for (;;) pause();
    return 0;
}
