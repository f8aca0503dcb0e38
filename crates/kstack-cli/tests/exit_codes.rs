//! The exit codes as users read them: every row of README.md's "Exit codes" table is in
//! `kstack --help`, `kstack -h` names every code, and the deploy lock's code (75) is told apart
//! from a failed verify check (4) in the help of the commands that return them. That the table
//! is the code's own is checked in `src/exit.rs`.
use std::path::PathBuf;
use std::process::Command;

fn kstack(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kstack"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run kstack");
    assert!(out.status.success(), "kstack {args:?}: {:?}", out.status);
    String::from_utf8(out.stdout).unwrap()
}

/// Words separated by single spaces: the help wraps lines, the README does not.
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The rows of README.md's table under `## Exit codes`: (code, meaning).
fn readme_table() -> Vec<(String, String)> {
    // The checkout the test runs in (cargo sets it at run time).
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    let readme = std::fs::read_to_string(dir.join("../../README.md")).unwrap();
    let section = readme
        .split("\n## Exit codes\n")
        .nth(1)
        .expect("README.md has a section `## Exit codes`");
    section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (cells[0].to_owned(), cells[1].to_owned())
        })
        .collect()
}

#[test]
fn help_ends_with_the_readme_table_of_exit_codes() {
    let help = words(&kstack(&["--help"]));
    let table = readme_table();
    assert_eq!(
        table.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(),
        ["0", "1", "2", "3", "4", "75", "130"]
    );
    for (code, meaning) in &table {
        let row = words(&format!("{code} {meaning}"));
        assert!(
            help.contains(&row),
            "`kstack --help` lacks `{row}`:\n{help}"
        );
    }
    let short = words(&kstack(&["-h"]));
    for (code, _) in &table {
        assert!(
            short.contains(&format!(" {code} ")),
            "`kstack -h` lacks exit code {code}:\n{short}"
        );
    }
}

#[test]
fn the_lock_and_a_failed_check_have_their_own_codes_in_the_commands_help() {
    let deploy = words(&kstack(&["deploy", "--help"]));
    assert!(deploy.contains("Fail at once (exit 75)"), "{deploy}");
    assert!(
        deploy.contains("75 --no-wait and another writer holds the lock"),
        "{deploy}"
    );
    let rollback = words(&kstack(&["rollback", "--help"]));
    assert!(rollback.contains("Fail at once (exit 75)"), "{rollback}");
    let verify = words(&kstack(&["verify", "--help"]));
    assert!(verify.contains("4 a step failed"), "{verify}");
}
