# Sourced by the hack/ scripts that start daemons and keep their pids in files.
#
# A pid file outlives its process: a run killed before it cleaned up, or a machine restarted
# from a copy of its disk, leaves files naming pids that the kernel hands out again (pid_max is
# 32768 on these machines, so it wraps within one test run). Signalling such a pid would hit an
# unrelated process. A pid file is trusted only while its process started no later than the file
# was written: a reused pid always belongs to a later process.

# pid_in FILE: prints the pid FILE names if that process still runs; prints nothing otherwise.
pid_in() {
    local file=$1 pid start btime tck mtime
    [ -f "$file" ] || return 0
    pid=$(head -c 32 "$file" | tr -dc 0-9)
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    # Field 22 of /proc/PID/stat, the start time in clock ticks after boot; counted after the
    # command name's closing parenthesis, as the name may hold spaces.
    start=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $20}')
    [ -n "$start" ] || return 0
    btime=$(awk '$1 == "btime" {print $2}' /proc/stat)
    tck=$(getconf CLK_TCK)
    mtime=$(stat -c %Y "$file")
    if [ $((btime + start / tck)) -le $((mtime + 1)) ]; then echo "$pid"; fi
}

# stop_pid_in FILE [SECONDS]: stops the process FILE names (TERM, then KILL after SECONDS,
# default 10), if it is still the one the file was written for, and deletes FILE.
stop_pid_in() {
    local file=$1 secs=${2:-10} pid i
    pid=$(pid_in "$file")
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        for ((i = 0; i < secs * 5; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
    fi
    rm -f "$file"
}
