//! Scheduled backups of the cloud's databases (`kstack_backup_*`): when one is taken, how many
//! are kept, and the size of the volume that keeps them.
use serde::Deserialize;

use super::kolla::{self, Issues, Read, number_or_kind};

/// Backups kept on the volume when `kstack_backup_keep` is not set.
pub const DEFAULT_BACKUP_KEEP: u32 = 7;
const MAX_BACKUP_KEEP: u64 = 1000;
/// The backup volume's size when `kstack_backup_volume_size` is not set.
pub const DEFAULT_BACKUP_VOLUME_SIZE: &str = "10Gi";

/// The typed scheduled backup: on when `kstack_backup_schedule` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledBackup {
    /// A CronJob schedule (five fields, or `@daily` and the like), in the cluster's time zone
    /// (UTC unless the controller manager says otherwise).
    pub schedule: String,
    /// How many backups the volume keeps; the oldest go once a new one is whole.
    pub keep: u32,
    /// The backup volume's requested size (a Kubernetes quantity).
    pub volume_size: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct BackupSettings {
    #[serde(deserialize_with = "kolla::text")]
    kstack_backup_schedule: Read<String>,
    #[serde(deserialize_with = "kolla::integer")]
    kstack_backup_keep: Read<u64>,
    #[serde(deserialize_with = "kolla::text")]
    kstack_backup_volume_size: Read<String>,
}

impl BackupSettings {
    /// The scheduled backup, `None` when `kstack_backup_schedule` is not set or empty. The
    /// other two are checked either way, so a mistake shows before the schedule is turned on.
    pub fn scheduled(&self, t: &mut Issues) -> Option<ScheduledBackup> {
        let schedule = t.opt_text("kstack_backup_schedule", &self.kstack_backup_schedule);
        if let Some(s) = &schedule
            && let Err(why) = check_schedule(s)
        {
            t.push(
                "kstack_backup_schedule",
                None,
                format!("`{s}` is not a CronJob schedule: {why}"),
                "write five fields (minute hour day-of-month month day-of-week), e.g. \
                 `kstack_backup_schedule: \"30 2 * * *\"` for 02:30 every day, or `@daily`"
                    .into(),
            );
        }
        let keep = self.keep(t);
        let volume_size = t
            .opt_text("kstack_backup_volume_size", &self.kstack_backup_volume_size)
            .unwrap_or_else(|| DEFAULT_BACKUP_VOLUME_SIZE.to_owned());
        if !is_quantity(&volume_size) {
            t.push(
                "kstack_backup_volume_size",
                None,
                format!("`{volume_size}` is not a Kubernetes quantity"),
                "write a size such as `kstack_backup_volume_size: \"20Gi\"`".into(),
            );
        }
        schedule.map(|schedule| ScheduledBackup {
            schedule,
            keep,
            volume_size,
        })
    }

    fn keep(&self, t: &mut Issues) -> u32 {
        let r = &self.kstack_backup_keep;
        if !r.is_set() {
            return DEFAULT_BACKUP_KEEP;
        }
        match r.typed.filter(|n| (1..=MAX_BACKUP_KEEP).contains(n)) {
            Some(n) => u32::try_from(n).unwrap_or(DEFAULT_BACKUP_KEEP),
            None => {
                t.push(
                    "kstack_backup_keep",
                    None,
                    format!(
                        "expected a whole number of backups from 1 to {MAX_BACKUP_KEEP}, found {}",
                        number_or_kind(r.raw())
                    ),
                    "write e.g. `kstack_backup_keep: 7`".into(),
                );
                DEFAULT_BACKUP_KEEP
            }
        }
    }
}

/// The shorthands Kubernetes' CronJob takes instead of five fields.
const DESCRIPTORS: &[&str] = &[
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];
const MONTHS: &[&str] = &[
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// Checks a CronJob schedule as Kubernetes reads it (five fields of `*`, `?`, numbers, names of
/// months and days, ranges `a-b`, steps `/n` and lists `,`, or a descriptor); the reason when it
/// is not one.
pub fn check_schedule(s: &str) -> Result<(), String> {
    if s.starts_with('@') {
        return if DESCRIPTORS.contains(&s) {
            Ok(())
        } else {
            Err(format!("the shorthands are {}", DESCRIPTORS.join(", ")))
        };
    }
    if s.contains("TZ=") {
        return Err("a time zone in the schedule is not allowed by Kubernetes".into());
    }
    let fields: Vec<&str> = s.split_whitespace().collect();
    if fields.len() != 5 {
        let n = fields.len();
        return Err(format!(
            "it has {n} field{}, not 5",
            if n == 1 { "" } else { "s" }
        ));
    }
    let spec: [(&str, u32, u32, &[&str]); 5] = [
        ("minute", 0, 59, &[]),
        ("hour", 0, 23, &[]),
        ("day of month", 1, 31, &[]),
        ("month", 1, 12, MONTHS),
        ("day of week", 0, 7, DAYS),
    ];
    for (field, (what, low, high, names)) in fields.iter().zip(spec) {
        for item in field.split(',') {
            check_item(item, low, high, names)
                .map_err(|e| format!("the {what} field `{field}`: {e}"))?;
        }
    }
    Ok(())
}

fn check_item(item: &str, low: u32, high: u32, names: &[&str]) -> Result<(), String> {
    let (range, step) = match item.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (item, None),
    };
    if let Some(step) = step {
        match step.parse::<u32>() {
            Ok(n) if n >= 1 => {}
            _ => return Err(format!("`{step}` is not a step (a whole number from 1)")),
        }
    }
    if range == "*" || range == "?" {
        return Ok(());
    }
    let value = |v: &str| -> Result<u32, String> {
        let n = match names.iter().position(|n| n.eq_ignore_ascii_case(v)) {
            // Months count from 1, days from 0 (Sunday).
            Some(i) => u32::try_from(i).unwrap_or(0) + low,
            None => v
                .parse::<u32>()
                .map_err(|_| format!("`{v}` is not a number from {low} to {high}"))?,
        };
        if (low..=high).contains(&n) {
            Ok(n)
        } else {
            Err(format!("{n} is outside {low} to {high}"))
        }
    };
    match range.split_once('-') {
        Some((a, b)) => {
            let (a, b) = (value(a)?, value(b)?);
            if a > b {
                return Err(format!("the range `{range}` runs backwards"));
            }
        }
        None => {
            value(range)?;
        }
    }
    Ok(())
}

/// Whether `s` is a Kubernetes quantity of bytes: a decimal number with an optional binary
/// (`Ki` to `Ei`) or decimal (`k` to `E`) suffix.
pub fn is_quantity(s: &str) -> bool {
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(number_end);
    let digits_ok = !number.is_empty()
        && number.split('.').count() <= 2
        && number.split('.').all(|p| !p.is_empty());
    digits_ok
        && [
            "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E",
        ]
        .contains(&suffix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_kubernetes_takes_pass() {
        for s in [
            "30 2 * * *",
            "*/15 * * * *",
            "0 3 * * SUN",
            "0 0 1 JAN,jul *",
            "0 1-5/2 ? * mon-fri",
            "@daily",
            "59 23 31 12 7",
        ] {
            assert_eq!(check_schedule(s), Ok(()), "{s}");
        }
    }

    #[test]
    fn schedules_kubernetes_refuses_say_why() {
        for (s, why) in [
            ("30 2 * *", "it has 4 fields, not 5"),
            ("60 * * * *", "the minute field `60`: 60 is outside 0 to 59"),
            ("0 24 * * *", "the hour field `24`: 24 is outside 0 to 23"),
            (
                "0 0 0 * *",
                "the day of month field `0`: 0 is outside 1 to 31",
            ),
            (
                "0 0 * FOO *",
                "the month field `FOO`: `FOO` is not a number from 1 to 12",
            ),
            ("*/0 * * * *", "the minute field `*/0`: `0` is not a step"),
            (
                "0 5-1 * * *",
                "the hour field `5-1`: the range `5-1` runs backwards",
            ),
            ("@sometimes", "the shorthands are @yearly"),
            (
                "TZ=UTC 0 0 * * *",
                "a time zone in the schedule is not allowed",
            ),
        ] {
            let got = check_schedule(s).unwrap_err();
            assert!(got.starts_with(why), "{s}: {got}");
        }
    }

    #[test]
    fn quantities() {
        for q in ["10Gi", "500Mi", "1.5Ti", "20G", "1073741824"] {
            assert!(is_quantity(q), "{q}");
        }
        for q in ["", "Gi", "10 Gi", "10gb", "1..5Gi", "-1Gi", "10GiB"] {
            assert!(!is_quantity(q), "{q}");
        }
    }
}
