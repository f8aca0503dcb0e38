//! Ready-made inputs for tests and benchmarks of the crates above this one: a passwords.yml
//! filled deterministically, and a whole [`Config`] built from it.
//!
//! SSH key pairs get fixed stand-ins instead of real RSA keys: no template uses them, and
//! generating them costs seconds per call.
//!
//! Behind the `testing` feature: dependents turn it on in their `[dev-dependencies]`.
use std::collections::BTreeMap;

use kstack_model::catalog::Catalog;
use kstack_model::globals::Globals;
use rand::SeedableRng;

use crate::passwords::{self, Passwords};
use crate::{Config, genpwd, templates};

fn key_stub(line: &str) -> String {
    match line.trim_end() {
        "  private_key:" => "  private_key: stand-in-private-key\n".to_owned(),
        "  public_key:" => "  public_key: ssh-rsa stand-in-public-key\n".to_owned(),
        l => format!("{l}\n"),
    }
}

/// The text of a passwords.yml with every known key filled by `genpwd` from an RNG seeded with
/// `seed`: the same seed gives the same values.
pub fn passwords_yml(seed: u64) -> String {
    let starter: String = templates::passwords_yml().lines().map(key_stub).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    genpwd::fill(&starter, &mut rng)
        .expect("the starter passwords.yml fills")
        .text
}

/// [`passwords_yml`]`(seed)`, parsed.
pub fn passwords(seed: u64) -> Passwords {
    passwords::parse(&passwords_yml(seed)).expect("a filled passwords.yml parses")
}

/// A config of `globals`, the built-in catalog, [`passwords`]`(1)` and the given override files
/// (paths relative to `config/`).
pub fn config(globals: Globals, overrides: &[(&str, &str)]) -> Config {
    let overrides: BTreeMap<String, Vec<u8>> = overrides
        .iter()
        .map(|(p, text)| ((*p).to_owned(), text.as_bytes().to_vec()))
        .collect();
    Config::from_parts(
        globals,
        passwords(1),
        overrides,
        Catalog::builtin().expect("the built-in catalog is valid"),
    )
}
