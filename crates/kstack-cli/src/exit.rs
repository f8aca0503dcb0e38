//! Every exit code of `kstack`, each with one meaning. Commands return an [`Exit`]; `main`
//! turns an error into [`Exit::BadInput`] (a [`crate::cmd::InputError`]) or [`Exit::Failed`].
//! No other module names an exit code by its number or builds a [`ExitCode`].
//!
//! The numbers are part of the command line's interface: scripts test for them, so a number
//! keeps its meaning and is never reused for another. README.md's "Exit codes" table and the
//! end of `kstack --help` list the same codes with the same words (the tests below and
//! `tests/exit_codes.rs` keep them equal).
//!
//! `kstack dev` is the one command outside the table: a thin front to the `hack/` scripts of a
//! kstack checkout, it exits with the script's own status ([`script_status`]).
use std::process::{ExitCode, ExitStatus};

/// Why `kstack` exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Done.
    Success = 0,
    /// Failed for a reason no other code names: IO, the cluster, the network.
    Failed = 1,
    /// Bad usage (clap exits 2 for it too) or bad input: a file of the config directory, a
    /// catalog file, `kstack inventory serve`'s tokens or TLS files, a refused rollback.
    BadInput = 2,
    /// `kstack deploy` (either target) or `kstack rollback` did not finish: a step failed; the
    /// report says which and what was not started.
    StepFailed = 3,
    /// `kstack verify`: a check of the cloud failed, or something it created is left over;
    /// `kstack status`: the public endpoints' certificate has expired or names another host.
    CheckFailed = 4,
    /// `--no-wait` and another writer holds the cloud's deploy lock. Nothing failed: the same
    /// command succeeds once the other writer is done. 75 is `EX_TEMPFAIL` of sysexits.h, the
    /// code schedulers and wrappers already read as "try again later"; being far from the
    /// small codes, it is not taken for one more kind of failure.
    Locked = 75,
    /// Interrupted by Ctrl-C, after cleaning up: 128 + SIGINT, what a shell reports for a
    /// command killed by Ctrl-C.
    Interrupted = 130,
}

impl Exit {
    /// Every code, in ascending order: the table of README.md and `kstack --help`.
    pub const ALL: [Exit; 7] = [
        Exit::Success,
        Exit::Failed,
        Exit::BadInput,
        Exit::StepFailed,
        Exit::CheckFailed,
        Exit::Locked,
        Exit::Interrupted,
    ];

    /// The number the process exits with.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// A few words, for the short help (`kstack -h`).
    pub const fn label(self) -> &'static str {
        match self {
            Exit::Success => "success",
            Exit::Failed => "failed",
            Exit::BadInput => "bad input",
            Exit::StepFailed => "step failed",
            Exit::CheckFailed => "check failed",
            Exit::Locked => "locked",
            Exit::Interrupted => "interrupted",
        }
    }

    /// What the code means, as README.md's table and `kstack --help` say it.
    pub const fn meaning(self) -> &'static str {
        match self {
            Exit::Success => "success",
            Exit::Failed => {
                "failed for a reason no other code names: IO, the cluster, the network (the message says why)"
            }
            Exit::BadInput => {
                "bad usage or bad input: the command line, a file of the config directory, a catalog file, the tokens or TLS files of kstack inventory serve, a rollback refused"
            }
            Exit::StepFailed => {
                "kstack deploy or kstack rollback did not finish: a step failed (a Job, a service not healthy in time, the API server away longer than --api-outage; with --target compose, no Docker engine, a missing image, a container not healthy or a task failed); the report names it and what was not started"
            }
            Exit::CheckFailed => {
                "kstack verify: a check of the cloud failed, or something it created could not be deleted; kstack status: the public endpoints' certificate has expired or does not name the public host"
            }
            Exit::Locked => {
                "kstack deploy or kstack rollback with --no-wait: another writer holds the cloud's deploy lock (the message names it); nothing was deployed, try again later"
            }
            Exit::Interrupted => {
                "interrupted by Ctrl-C: kstack verify after deleting what it created, kstack deploy and kstack rollback after releasing the deploy lock"
            }
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit.code())
    }
}

/// Ends the process at once with `exit`, for a handler that cannot return to `main` (a second
/// Ctrl-C during cleanup).
pub fn exit_now(exit: Exit) -> ! {
    std::process::exit(i32::from(exit.code()))
}

/// `kstack dev`: the status of the script it ran (1 when a signal ended it).
pub fn script_status(status: ExitStatus) -> ExitCode {
    ExitCode::from(status.code().unwrap_or(1).clamp(0, 255) as u8)
}

/// Width of the help's lines: under clap's own wrapping (100 columns without a terminal).
const HELP_WIDTH: usize = 80;

/// `text` after `first` (the start of its first line, with its own trailing space), its words
/// wrapped at [`HELP_WIDTH`], continuation lines indented by `indent` spaces.
fn wrap(first: &str, text: &str, indent: usize) -> String {
    let mut out = String::new();
    let mut line = first.to_owned();
    let mut words_on_line = 0;
    for word in text.split(' ') {
        if words_on_line > 0 && line.len() + 1 + word.len() > HELP_WIDTH {
            out.push_str(&line);
            out.push('\n');
            line = " ".repeat(indent);
            words_on_line = 0;
        }
        if words_on_line > 0 {
            line.push(' ');
        }
        line.push_str(word);
        words_on_line += 1;
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// The end of `kstack -h`: every code with its label.
pub fn short_help() -> String {
    let codes: Vec<String> = Exit::ALL
        .iter()
        .map(|e| format!("{} {}", e.code(), e.label()))
        .collect();
    let text = format!("{} (--help says what each means).", codes.join(", "));
    wrap("Exit codes: ", &text, 0).trim_end().to_owned()
}

/// The end of `kstack --help`: the table of README.md.
pub fn long_help() -> String {
    let mut help = String::from("Exit codes, for every command but `kstack dev`:\n");
    for e in Exit::ALL {
        help.push_str(&wrap(&format!("  {:<5}", e.code()), e.meaning(), 7));
    }
    help.push('\n');
    help.push_str(&wrap(
        "",
        "`kstack dev` runs a script of the kstack checkout's hack/ folder and exits with its \
         status (`kstack dev status`: 3 when a process does not answer).",
        0,
    ));
    help.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    /// The checkout this test runs in: cargo sets `CARGO_MANIFEST_DIR` when it runs a test, and
    /// a test binary in a shared target directory may have been compiled in another checkout.
    fn crate_dir() -> PathBuf {
        std::env::var_os("CARGO_MANIFEST_DIR")
            .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
    }

    /// The rows of README.md's table under `## Exit codes`: (code, meaning).
    fn readme_table() -> Vec<(String, String)> {
        let path = crate_dir().join("../../README.md");
        let readme = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let section = readme
            .split("\n## Exit codes\n")
            .nth(1)
            .expect("README.md has a section `## Exit codes`");
        let rows: Vec<(String, String)> = section
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2) // the header and the |---| line
            .map(|l| {
                let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
                assert_eq!(cells.len(), 2, "README.md: a row of two cells: {l}");
                (cells[0].to_owned(), cells[1].to_owned())
            })
            .collect();
        assert!(
            !rows.is_empty(),
            "README.md: no table under `## Exit codes`"
        );
        rows
    }

    #[test]
    fn the_readme_table_is_the_code_table() {
        let code: Vec<(String, String)> = Exit::ALL
            .iter()
            .map(|e| (e.code().to_string(), e.meaning().to_owned()))
            .collect();
        let readme = readme_table();
        let as_rows = |t: &[(String, String)]| -> String {
            t.iter().map(|(c, m)| format!("| {c} | {m} |\n")).collect()
        };
        assert!(
            readme == code,
            "README.md's exit code table differs from crates/kstack-cli/src/exit.rs; its rows should read:\n{}",
            as_rows(&code)
        );
    }

    #[test]
    fn codes_ascend_and_every_one_is_listed_once() {
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert!(codes.windows(2).all(|w| w[0] < w[1]), "{codes:?}");
        // A new variant stops this match compiling: whoever adds one is sent here, to ALL.
        for e in Exit::ALL {
            match e {
                Exit::Success
                | Exit::Failed
                | Exit::BadInput
                | Exit::StepFailed
                | Exit::CheckFailed
                | Exit::Locked
                | Exit::Interrupted => {}
            }
        }
    }

    #[test]
    fn the_lock_and_a_failed_check_exit_differently() {
        assert_ne!(Exit::Locked.code(), Exit::CheckFailed.code());
        assert_eq!(Exit::Locked.code(), 75);
        assert_eq!(Exit::CheckFailed.code(), 4);
    }

    /// The `.rs` files under `dir`, in name order.
    fn rust_files(dir: &Path) -> Vec<PathBuf> {
        walkdir::WalkDir::new(dir)
            .sort_by_file_name()
            .into_iter()
            .map(|e| e.expect("a readable directory entry").into_path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect()
    }

    /// No module but this one picks an exit code by number: every `ExitCode` is built here.
    #[test]
    fn only_this_module_builds_an_exit_code() {
        let src = crate_dir().join("src");
        let files = rust_files(&src);
        let mut found = Vec::new();
        for path in files.iter().filter(|p| !p.ends_with("exit.rs")) {
            let text = std::fs::read_to_string(path).unwrap();
            for (i, line) in text.lines().enumerate() {
                if line.trim() == "#[cfg(test)]" {
                    break;
                }
                let code = line.split("//").next().unwrap_or("");
                if ["ExitCode::", "process::exit", "EXIT_"]
                    .iter()
                    .any(|p| code.contains(p))
                {
                    let name = path.strip_prefix(&src).unwrap_or(path).display();
                    found.push(format!("src/{name}:{}: {}", i + 1, line.trim()));
                }
            }
        }
        assert!(
            found.is_empty(),
            "exit codes are picked in src/exit.rs only (return an `Exit`):\n{}",
            found.join("\n")
        );
    }

    /// A command's own help may say what a code means for it, but only with the table's
    /// numbers: in its "Exit codes:" paragraph and in an "(exit N)" of an option.
    #[test]
    fn every_command_help_names_only_codes_of_the_table() {
        use clap::CommandFactory as _;
        let known = |n: u8| Exit::ALL.iter().any(|e| e.code() == n);
        let mut root = crate::Cli::command();
        root.build();
        // `kstack dev` exits with its script's status (see the module doc).
        let mut stack: Vec<clap::Command> = root
            .get_subcommands()
            .filter(|c| c.get_name() != "dev")
            .cloned()
            .collect();
        let mut paragraphs = 0;
        while let Some(mut cmd) = stack.pop() {
            stack.extend(cmd.get_subcommands().cloned());
            let name = cmd.get_name().to_owned();
            let help = cmd.render_long_help().to_string();
            let words: Vec<&str> = help
                .split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|w| !w.is_empty())
                .collect();
            for pair in words.windows(2) {
                if pair[0].eq_ignore_ascii_case("exit")
                    && let Ok(n) = pair[1].parse::<u8>()
                {
                    assert!(known(n), "`kstack {name} --help` says exit {n}:\n{help}");
                }
            }
            let Some(paragraph) = help.split("Exit codes").nth(1) else {
                continue;
            };
            let paragraph = paragraph.split("\n\n").next().unwrap_or("");
            paragraphs += 1;
            for word in paragraph.split(|c: char| !c.is_ascii_alphanumeric()) {
                if let Ok(n) = word.parse::<u8>() {
                    assert!(
                        known(n),
                        "`kstack {name} --help` names exit code {n}, which src/exit.rs does not have:\n{paragraph}"
                    );
                }
            }
        }
        assert!(
            paragraphs >= 5,
            "only {paragraphs} commands document exit codes"
        );
    }
}
