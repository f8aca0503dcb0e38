//! Loads a kstack config directory (`globals.yml`, `passwords.yml`, `catalog.yml`, `config/` overrides) into
//! the model, with miette diagnostics that name file, line, column and field.
//!
//! Architecture invariant: the core ([`load`], [`genpwd::fill`], [`passwords::parse`]) takes
//! bytes and returns values or diagnostics; only [`fs`] touches the file system.
//! Invariant: no value from passwords.yml appears in a diagnostic, log line or `Debug` output.

pub mod catalog;
mod diagnostic;
pub mod fs;
pub mod genpwd;
pub mod jinja;
mod load;
pub mod overrides;
pub mod passwords;
pub mod templates;
// Test support: compiled only for the tests and benchmarks that turn on `testing`, never into
// the kstack binary.
#[cfg(feature = "testing")]
pub mod testing;
mod yaml;

pub use diagnostic::{Diag, Severity, render_plain};
pub use load::{
    Config, GLOBALS_FILE, Loaded, PUBLIC_CERTIFICATE_FILE, PublicCertificate, Sources, load,
    load_globals,
};
