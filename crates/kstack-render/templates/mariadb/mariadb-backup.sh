#!/bin/bash
# One scheduled backup of the cloud's databases, run by the mariadb-backup CronJob in the
# mariadb-server image: the same backup `kstack backup` writes (a directory
# <namespace>-<UTC time> with the gzip of one mariadb-dump and its manifest), written on the
# backup volume, then only the newest $KSTACK_BACKUP_KEEP of them kept.
#
# A backup is made under a hidden name and renamed once whole (dump checked to its last line,
# manifest written), so a backup that failed or was cut off is never listed nor counted, and
# the old ones are removed only after a new one is whole.
#
# Env (set by kstack's renderer): KSTACK_BACKUP_DIR, KSTACK_BACKUP_KEEP, KSTACK_NAMESPACE,
# KSTACK_RELEASE_JSON (openstack_release as a JSON string), KSTACK_DB_SERVICE (only ready
# servers behind it), KSTACK_DB_PEERS (the headless Service naming each server), KSTACK_DB_USER
# (the backup's own MariaDB user, which may only read), KSTACK_DB_PORT, KSTACK_DUMP_OPTIONS,
# KSTACK_SYSTEM_DATABASES, KSTACK_DUMP_TRAILER, KSTACK_DUMP_FILE, KSTACK_MANIFEST_FILE,
# KSTACK_FORMAT; MYSQL_PWD (that user's password, from a Secret) is read by the clients
# themselves.
set -euo pipefail
umask 077
shopt -s nullglob

say() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*"; }
fail() { say "error: $*" >&2; exit 1; }

cd "$KSTACK_BACKUP_DIR"
# What a run killed before its end left (one run at a time: concurrencyPolicy Forbid).
rm -rf -- .partial-*

client=(--user="$KSTACK_DB_USER" --port="$KSTACK_DB_PORT")
# A ready server, then that server by its own name for everything else, so the list of
# databases and the dump come from one server.
member=$(mariadb "${client[@]}" --connect-timeout=10 --host="$KSTACK_DB_SERVICE" --batch --skip-column-names \
    --execute='SELECT @@hostname')
[[ $member =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || fail "MariaDB answered with hostname '$member'"
host=$member.$KSTACK_DB_PEERS
listed=$(mariadb "${client[@]}" --connect-timeout=10 --host="$host" --batch --skip-column-names --execute='SHOW DATABASES')
databases=()
while IFS= read -r db; do
    [ -n "$db" ] || continue
    case " $KSTACK_SYSTEM_DATABASES " in *" $db "*) continue ;; esac
    [[ $db =~ ^[A-Za-z0-9_]+$ ]] || fail "database '$db' has a name this backup does not take"
    databases+=("$db")
done <<<"$listed"
((${#databases[@]})) || fail "MariaDB on $member holds no service database (is the cloud deployed?)"

now=$(date -u +%s)
name=$KSTACK_NAMESPACE-$(date -u -d "@$now" +%Y%m%dT%H%M%SZ)
[ ! -e "$name" ] || fail "$KSTACK_BACKUP_DIR/$name exists already"
partial=.partial-$name
trap 'rm -rf -- "$KSTACK_BACKUP_DIR/$partial"' EXIT
mkdir -m 0700 -- "$partial"
say "backing up ${#databases[@]} databases from $member into $KSTACK_BACKUP_DIR/$name"

started=$(date +%s%N)
# shellcheck disable=SC2086 # the options are separate words
mariadb-dump "${client[@]}" --host="$host" $KSTACK_DUMP_OPTIONS --databases "${databases[@]}" |
    gzip -6 >"$partial/$KSTACK_DUMP_FILE"
last=$(gzip -dc "$partial/$KSTACK_DUMP_FILE" | awk 'NF { line = $0 } END { print line }')
[[ $last == "$KSTACK_DUMP_TRAILER"* ]] || fail "the dump ended before its last line (cut off); nothing was kept"
tenths=$((($(date +%s%N) - started) / 100000000))
bytes=$(stat -c %s "$partial/$KSTACK_DUMP_FILE")
sha256=$(sha256sum "$partial/$KSTACK_DUMP_FILE")
sha256=${sha256%% *}
names=$(printf '"%s", ' "${databases[@]}")
cat >"$partial/$KSTACK_MANIFEST_FILE" <<EOF
{
  "format": $KSTACK_FORMAT,
  "namespace": "$KSTACK_NAMESPACE",
  "openstack_release": $KSTACK_RELEASE_JSON,
  "taken_at": "$(date -u -d "@$now" +%Y-%m-%dT%H:%M:%SZ)",
  "seconds": $((tenths / 10)).$((tenths % 10)),
  "member": "$member",
  "databases": [${names%, }],
  "dump": {
    "file": "$KSTACK_DUMP_FILE",
    "bytes": $bytes,
    "sha256": "$sha256"
  }
}
EOF
sync -- "$partial/$KSTACK_DUMP_FILE" "$partial/$KSTACK_MANIFEST_FILE"
mv -- "$partial" "$name"
trap - EXIT
say "backup $name written: ${#databases[@]} databases, $bytes bytes compressed, $((tenths / 10)).$((tenths % 10)) s"

# The newest $KSTACK_BACKUP_KEEP whole backups of this namespace stay (names sort by time).
backups=("$KSTACK_NAMESPACE"-*/)
for ((i = 0; i < ${#backups[@]} - KSTACK_BACKUP_KEEP; i++)); do
    rm -rf -- "${backups[i]}"
    say "removed ${backups[i]%/} (kstack_backup_keep is $KSTACK_BACKUP_KEEP)"
done
