//! Error lines in a cloud's container logs: what counts as one, and the lines a healthy cloud
//! may still log, each with its reason (`log-errors-allowed.yaml` beside this crate's
//! Cargo.toml). A deployment tool's CI fails on any other: an error a user never sees in a
//! test is still a fault.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use anyhow::Context;
use regex::Regex;
use serde::Deserialize;

/// The allow-list, in the repository.
const ALLOWED: &str = include_str!("../log-errors-allowed.yaml");

/// What marks a line as an error, per the formats the cloud's containers write.
static ERROR_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        // oslo.log: `<date> <time> <pid> ERROR <logger> ...` (also inside Apache's lines).
        r"\b\d+ (?:ERROR|CRITICAL) [A-Za-z_][\w.]*",
        // A Python traceback, however it was logged.
        r"|Traceback \(most recent call last\)",
        // Python's logging without a format (kolla_set_configs and scripts).
        r"|^(?:ERROR|CRITICAL):",
        // MariaDB, RabbitMQ, Open vSwitch, libvirt; HAProxy's alerts.
        r"|\[ERROR\]|\[error\]|\|(?:ERR|EMER)\||: error : |\[ALERT\]",
    ))
    .expect("the error pattern is valid")
});

/// Digits, hex ids and addresses, so lines that differ only in them are counted together.
static VARIABLE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[0-9a-f]{8,}(?:-[0-9a-f]{4,})*|\d+").expect("valid"));

/// One entry of the allow-list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    /// The container's name (`nova-conductor`), or a regular expression matching it.
    container: String,
    /// A regular expression a line must match.
    matches: String,
    /// Why the line is not a fault of the cloud.
    reason: String,
}

/// An entry, compiled.
#[derive(Debug)]
pub struct Allowed {
    pub container: Regex,
    pub matches: Regex,
    pub reason: String,
}

/// The repository's allow-list; every entry must give a reason.
pub fn allowed() -> anyhow::Result<Vec<Allowed>> {
    let entries: Vec<Entry> = serde_saphyr::from_str(ALLOWED).context("log-errors-allowed.yaml")?;
    entries
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            anyhow::ensure!(
                !e.reason.trim().is_empty(),
                "log-errors-allowed.yaml entry {}: no reason",
                i + 1
            );
            Ok(Allowed {
                container: Regex::new(&format!("^(?:{})$", e.container))
                    .with_context(|| format!("entry {}: container", i + 1))?,
                matches: Regex::new(&e.matches)
                    .with_context(|| format!("entry {}: matches", i + 1))?,
                reason: e.reason,
            })
        })
        .collect()
}

/// Whether `line` is at ERROR or CRITICAL, or part of a traceback.
pub fn is_error(line: &str) -> bool {
    ERROR_LINE.is_match(line)
}

/// The container a kubelet log file belongs to:
/// `/var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log`.
pub fn container_of(file: &str) -> Option<&str> {
    let mut parts = file.rsplit('/');
    parts.next()?;
    parts.next()
}

/// oslo.log's prefix of a line, the same on every line of one record (a message and its
/// traceback): `<date> <time> <pid> <LEVEL> <logger>`.
static OSLO_RECORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \d+ (?:ERROR|CRITICAL) [A-Za-z_][\w.]*")
        .expect("valid")
});

/// RabbitMQ's prefix of a line, the same on every line of one event (a crash report is dozens
/// of lines): `<date> <time>+<offset> [error] <pid>`.
static RABBIT_RECORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+\+\d\d:\d\d \[(?:error|critical)\] <[\d.]+>")
        .expect("valid")
});

/// A line that carries no level of its own but a Python traceback: the rest of a record whose
/// message spans lines (an RPC's remote traceback, printed as a list after its message).
static LEVEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b\d+ (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [A-Za-z_]|\[ERROR\]|\[error\]|\|(?:ERR|EMER)\||: error : |^(?:ERROR|CRITICAL):")
        .expect("valid")
});

/// RabbitMQ's channel error, whose reason it logs as its next error line: the two are one record.
static RABBIT_CHANNEL_ERROR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Channel error on connection .*, channel \d+:(?:\x1b\[0m)?\s*$").expect("valid")
});

/// An Erlang supervisor's report that it shut down (`errorContext: shutdown`, after a child it
/// cannot restart exited, or `shutdown_error`, its parent's report of it): RabbitMQ logs it right
/// after the crash of that child, which is what it reports on.
static SUPERVISOR_SHUTDOWN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\] <[\d.]+>\s+errorContext: shutdown(?:_error)?(?:\x1b\[0m)?\s*$").expect("valid")
});

/// The time in a RabbitMQ line's prefix.
static RABBIT_TIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\+\d\d:\d\d \[(?:error|critical)\]")
        .expect("valid")
});

/// When a RabbitMQ line was logged, by its own prefix.
fn rabbit_time(line: &str) -> Option<chrono::NaiveDateTime> {
    let at = RABBIT_TIME.captures(line)?.get(1)?.as_str();
    chrono::NaiveDateTime::parse_from_str(at, "%Y-%m-%d %H:%M:%S%.f").ok()
}

/// The `(container, line)` pairs of rows of the central log store (`file`, `_time`, `_msg`), in
/// the order each container wrote them.
pub fn ordered(rows: &[serde_json::Value]) -> Vec<(&str, &str)> {
    let mut lines: Vec<(&str, chrono::DateTime<chrono::FixedOffset>, &str)> = rows
        .iter()
        .filter_map(|r| {
            let container = container_of(r["file"].as_str()?)?;
            let time = chrono::DateTime::parse_from_rfc3339(r["_time"].as_str()?).ok()?;
            Some((container, time, r["_msg"].as_str()?))
        })
        .collect();
    lines.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    lines.into_iter().map(|(c, _, m)| (c, m)).collect()
}

/// What a scan found.
#[derive(Debug, Default)]
pub struct Scan {
    /// Error records no entry allows, by container and their first line with its numbers and
    /// ids blanked: how many, and one of them as logged.
    pub unexpected: BTreeMap<(String, String), (usize, String)>,
    /// Error records each entry allowed, in the list's order.
    pub allowed: Vec<usize>,
    /// Error lines in all.
    pub errors: usize,
}

impl Scan {
    /// Scans `(container, line)` pairs, each container's in the order it wrote them. The lines
    /// of one oslo.log record (a message and the traceback under it, each line with the same
    /// prefix, and a traceback line with no level of its own that follows) are one record, as
    /// are the lines of one RabbitMQ event (the same prefix) and RabbitMQ's channel error and
    /// the reason it logs next, and a supervisor's report of its shutdown and the crash of the
    /// child that caused it (the record of the same container logged within a second before);
    /// an entry allows a record when it matches any of its lines.
    pub fn of<'a>(lines: impl IntoIterator<Item = (&'a str, &'a str)>, allow: &[Allowed]) -> Scan {
        let mut scan = Scan {
            allowed: vec![0; allow.len()],
            ..Scan::default()
        };
        // Records in the order their first line came, each with its lines.
        let mut records: Vec<(&str, Vec<&str>)> = Vec::new();
        let mut open: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        let mut last: BTreeMap<&str, usize> = BTreeMap::new();
        // A RabbitMQ channel error waiting for its reason, per container.
        let mut reason_of: BTreeMap<&str, usize> = BTreeMap::new();
        for (container, line) in lines {
            if !is_error(line) {
                continue;
            }
            scan.errors += 1;
            match OSLO_RECORD.find(line).or_else(|| RABBIT_RECORD.find(line)) {
                Some(prefix) => {
                    let at = *open.entry((container, prefix.as_str())).or_insert_with(|| {
                        records.push((container, Vec::new()));
                        records.len() - 1
                    });
                    records[at].1.push(line);
                    last.insert(container, at);
                }
                None => {
                    if let Some(at) = reason_of.remove(container) {
                        records[at].1.push(line);
                        continue;
                    }
                    match last.get(container) {
                        Some(&at) if !LEVEL.is_match(line) => records[at].1.push(line),
                        _ => records.push((container, vec![line])),
                    }
                    if RABBIT_CHANNEL_ERROR.is_match(line) {
                        reason_of.insert(container, records.len() - 1);
                    }
                }
            }
        }
        let records = join_supervisor_shutdowns(records);
        for (container, lines) in records {
            match allow.iter().position(|a| {
                a.container.is_match(container) && lines.iter().any(|l| a.matches.is_match(l))
            }) {
                Some(i) => scan.allowed[i] += 1,
                None => {
                    let first = lines[0];
                    let key = VARIABLE.replace_all(first, "#").into_owned();
                    let shown: String = lines.join("\n").chars().take(1500).collect();
                    scan.unexpected
                        .entry((container.to_owned(), key))
                        .or_insert((0, shown))
                        .0 += 1;
                }
            }
        }
        scan
    }

    /// The unexpected records, one per kind, for a failure message.
    pub fn report(&self) -> String {
        self.unexpected
            .iter()
            .map(|((container, _), (n, record))| format!("{container} ({n}x):\n{record}"))
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

/// Joins each supervisor's shutdown report to the record of the same container logged just
/// before it (within a second): the crash it reports on, so that crash's entry in the list
/// decides for both. A shutdown report with no such record stays a record of its own.
fn join_supervisor_shutdowns<'a>(
    records: Vec<(&'a str, Vec<&'a str>)>,
) -> Vec<(&'a str, Vec<&'a str>)> {
    let mut joined: Vec<(&str, Vec<&str>)> = Vec::with_capacity(records.len());
    let mut last: BTreeMap<&str, usize> = BTreeMap::new();
    for (container, lines) in records {
        let shutdown = lines.iter().any(|l| SUPERVISOR_SHUTDOWN.is_match(l));
        let before = last.get(container).copied().filter(|&at| {
            let (Some(then), Some(now)) = (
                joined[at].1.last().and_then(|l| rabbit_time(l)),
                lines.first().and_then(|l| rabbit_time(l)),
            ) else {
                return false;
            };
            now >= then && now - then <= chrono::TimeDelta::seconds(1)
        });
        match before {
            Some(at) if shutdown => joined[at].1.extend(lines),
            _ => {
                joined.push((container, lines));
                last.insert(container, joined.len() - 1);
            }
        }
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_formats_the_cloud_writes_are_recognised() {
        for line in [
            "2026-11-27 03:00:00.123 7 ERROR nova.compute.manager [None req-1] boom",
            "2026-11-27 03:00:00.123 7 CRITICAL keystone [-] Unhandled error",
            "[Fri Nov 27 03:00:00 2026] [wsgi:error] [pid 9] 2026-11-27 03:00:00.1 9 ERROR keystone.server.flask.application x",
            "2026-11-27 03:00:00.123 7 ERROR oslo_messaging.rpc.server Traceback (most recent call last):",
            "ERROR:__main__:Missing config file",
            "2026-11-27  3:00:00 0 [ERROR] WSREP: failed to open gcomm backend",
            "2026-11-27 03:00:00.000 [error] <0.123.0> closing AMQP connection",
            "2026-11-27T03:00:00.000Z|00042|netdev|ERR|eth0: could not set MTU",
            "2026-11-27 03:00:00.000+0000: 1234: error : virNetSocketNew: failed",
            "[ALERT]    (6) : [/usr/sbin/haproxy.main()] Cannot raise FD limit to 80035, limit is 20000.",
        ] {
            assert!(is_error(line), "{line}");
        }
        for line in [
            "2026-11-27 03:00:00.123 7 INFO nova.compute.manager [None req-1] fine",
            "2026-11-27 03:00:00.123 7 WARNING nova.compute.manager no ERROR here",
            "[Fri Nov 27 03:00:00 2026] [wsgi:error] [pid 9] 2026-11-27 03:00:00.1 9 INFO keystone.common x",
            "INFO:__main__:Loading config file at /var/lib/kolla/config_files/config.json",
            "2026-11-27 03:00:00.000 [info] <0.123.0> accepting AMQP connection",
            "[NOTICE]   (6) : haproxy version is 2.6.12-1+deb12u4",
        ] {
            assert!(!is_error(line), "{line}");
        }
    }

    #[test]
    fn the_repositorys_allow_list_loads_and_every_entry_has_a_reason() {
        let allow = allowed().unwrap();
        assert!(allow.iter().all(|a| !a.reason.trim().is_empty()));
    }

    #[test]
    fn nova_s_marker_record_is_allowed_in_the_upgrade_and_a_real_server_s_is_not() {
        let allow = allowed().unwrap();
        // Two records (another time and request each), not one record's two lines.
        let line = |uuid: &str| {
            format!(
                "2026-11-29 11:42:1{} 20 ERROR nova.objects.instance [None req-{} - - - - - -] \
                 [instance: {uuid}] Unable to migrate instance because host None with node None \
                 not found: nova.exception.ComputeHostNotFound: Compute host None could not be found.",
                &uuid[..1],
                &uuid[..1]
            )
        };
        let (marker, server) = (
            line("00000000-0000-0000-0000-000000000000"),
            line("3a68b627-3981-430c-9379-f480feedd4f3"),
        );
        let scan = Scan::of(
            [
                ("nova-conductor", marker.as_str()),
                ("nova-conductor", server.as_str()),
            ],
            &allow,
        );
        assert_eq!(scan.errors, 2);
        assert_eq!(scan.unexpected.len(), 1, "{scan:?}");
        assert_eq!(scan.allowed.iter().sum::<usize>(), 1, "{scan:?}");
    }

    #[test]
    fn allowed_lines_are_counted_per_entry_and_the_rest_grouped() {
        let allow = vec![Allowed {
            container: Regex::new("^(?:neutron-server)$").unwrap(),
            matches: Regex::new("SubnetNotFound").unwrap(),
            reason: "a test deletes the subnet under a running request".into(),
        }];
        let lines = [
            (
                "neutron-server",
                "1 2 3 ERROR neutron.api SubnetNotFound: 1234abcd",
            ),
            ("nova-conductor", "1 2 3 ERROR nova.conductor boom 1"),
            ("nova-conductor", "1 2 3 ERROR nova.conductor boom 2"),
            ("nova-api", "1 2 3 INFO nova.api fine"),
        ];
        let scan = Scan::of(lines, &allow);
        assert_eq!(scan.errors, 3);
        assert_eq!(scan.allowed, vec![1]);
        assert_eq!(scan.unexpected.len(), 1, "{scan:?}");
        let ((container, _), (n, _)) = scan.unexpected.iter().next().unwrap();
        assert_eq!((container.as_str(), *n), ("nova-conductor", 2));
        assert_eq!(
            container_of("/var/log/pods/ns_p_u/keystone/0.log"),
            Some("keystone")
        );
    }

    #[test]
    fn the_lines_of_one_rabbitmq_crash_report_are_one_record() {
        let allow = vec![Allowed {
            container: Regex::new("^(?:rabbitmq)$").unwrap(),
            matches: Regex::new("stream_not_found").unwrap(),
            reason: "a stream starting".into(),
        }];
        let at = |t: &str, pid: &str, rest: &str| {
            format!("\x1b[38;5;160m2026-11-29 03:02:21.{t}+00:00 [error] <{pid}> {rest}\x1b[0m")
        };
        let lines = [
            at(
                "436627",
                "0.1001.0",
                "** Generic server <0.1001.0> terminating",
            ),
            at("436627", "0.1001.0", "** Last message in was {'$gen_cast',"),
            at(
                "436627",
                "0.1001.0",
                "** {{stream_not_found,{resource,<<\"/\">>,queue,<<\"x_fanout\">>}},",
            ),
            at("442398", "0.1001.0", "  crasher:"),
            at(
                "442398",
                "0.1001.0",
                "    exception exit: {{stream_not_found,",
            ),
            // Another event, of another process: a record of its own.
            at("450000", "0.2000.0", "  crasher:"),
            at("450000", "0.2000.0", "    exception exit: badarg"),
        ];
        let scan = Scan::of(lines.iter().map(|l| ("rabbitmq", l.as_str())), &allow);
        assert_eq!(scan.errors, 7);
        assert_eq!(scan.allowed, vec![2], "{scan:?}");
        assert_eq!(scan.unexpected.len(), 1, "{scan:?}");
        let (_, (n, shown)) = scan.unexpected.iter().next().unwrap();
        assert_eq!(*n, 1);
        assert!(shown.contains("badarg"), "{shown}");
    }

    #[test]
    fn a_rabbitmq_channel_error_and_its_reason_are_one_record() {
        let allow = vec![Allowed {
            container: Regex::new("^(?:rabbitmq)$").unwrap(),
            matches: Regex::new("does not have a replica").unwrap(),
            reason: "a stream starting".into(),
        }];
        let lines = [
            (
                "rabbitmq",
                "2026-11-28 10:59:01.844765+00:00 [error] <0.1008.0> Channel error on connection <0.988.0> (10.245.0.41:47452 -> 10.245.0.7:5672, vhost: '/', user: 'openstack'), channel 1:\x1b[0m",
            ),
            (
                "rabbitmq",
                "2026-11-28 10:59:01.844765+00:00 [error] <0.1008.0> operation basic.consume caused a channel exception precondition_failed: queue 'queue 'x_fanout' in vhost '/'' does not have a replica on the local node",
            ),
            (
                "rabbitmq",
                "2026-11-28 10:59:02.000000+00:00 [error] <0.1009.0> Channel error on connection <0.989.0> (10.245.0.41:47453 -> 10.245.0.7:5672, vhost: '/', user: 'openstack'), channel 1:",
            ),
            (
                "rabbitmq",
                "2026-11-28 10:59:02.000000+00:00 [error] <0.1009.0> operation queue.delete caused a channel exception not_found",
            ),
        ];
        let scan = Scan::of(lines, &allow);
        assert_eq!(scan.errors, 4);
        assert_eq!(scan.allowed, vec![1]);
        // The other channel error is one unexpected record with its own reason.
        assert_eq!(scan.unexpected.len(), 1, "{scan:?}");
        let (_, (n, shown)) = scan.unexpected.iter().next().unwrap();
        assert_eq!(*n, 1);
        assert!(shown.contains("not_found"), "{shown}");
    }
    #[test]
    fn a_supervisors_shutdown_goes_with_the_crash_before_it() {
        let allow = vec![Allowed {
            container: Regex::new("^(?:rabbitmq)$").unwrap(),
            matches: Regex::new(r"\{\{stream_not_found,").unwrap(),
            reason: "a stream starting".into(),
        }];
        // As the real node's RabbitMQ of 2024.2 logged them (the container runtime's prefix,
        // RabbitMQ's colours): a channel's crash, its supervisor's shutdown, that supervisor's
        // parent's report of it; then, minutes later, a shutdown with no crash before it.
        let at = |t: &str, pid: &str, rest: &str| {
            format!(
                "2026-11-29T12:{t}Z stdout F \x1b[38;5;160m2026-11-29 12:{t}+00:00 [error] <{pid}> {rest}\x1b[0m"
            )
        };
        let lines = [
            at("15:22.998100", "0.1035.0", "  crasher:"),
            at(
                "15:22.998100",
                "0.1035.0",
                "    exception exit: {{stream_not_found,",
            ),
            at(
                "15:23.000142",
                "0.1032.0",
                "    supervisor: {<0.1032.0>,rabbit_channel_sup}",
            ),
            at("15:23.000142", "0.1032.0", "    errorContext: shutdown"),
            at(
                "15:23.000142",
                "0.1032.0",
                "    reason: reached_max_restart_intensity",
            ),
            at(
                "15:23.000287",
                "0.1029.0",
                "    supervisor: {<0.1029.0>,rabbit_channel_sup_sup}",
            ),
            at(
                "15:23.000287",
                "0.1029.0",
                "    errorContext: shutdown_error",
            ),
            at("15:23.000287", "0.1029.0", "    reason: shutdown"),
            at(
                "19:40.100000",
                "0.4000.0",
                "    supervisor: {<0.4000.0>,rabbit_channel_sup}",
            ),
            at("19:40.100000", "0.4000.0", "    errorContext: shutdown"),
            at(
                "19:40.100000",
                "0.4000.0",
                "    reason: reached_max_restart_intensity",
            ),
        ];
        let scan = Scan::of(lines.iter().map(|l| ("rabbitmq", l.as_str())), &allow);
        assert_eq!(scan.errors, 11);
        assert_eq!(scan.allowed, vec![1], "{scan:?}");
        assert_eq!(scan.unexpected.len(), 1, "{scan:?}");
        let (_, (n, shown)) = scan.unexpected.iter().next().unwrap();
        assert_eq!(*n, 1);
        assert!(shown.contains("<0.4000.0>"), "{shown}");

        // A crash the list does not allow takes its supervisors' reports with it.
        let scan = Scan::of(lines[..8].iter().map(|l| ("rabbitmq", l.as_str())), &[]);
        assert_eq!(scan.unexpected.len(), 1, "{scan:?}");
        let (_, (n, shown)) = scan.unexpected.iter().next().unwrap();
        assert_eq!(*n, 1);
        assert!(
            shown.contains("crasher") && shown.contains("shutdown_error"),
            "{shown}"
        );
    }
}
