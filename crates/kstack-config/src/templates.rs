//! Starter files written by `kstack init`.

/// A commented globals.yml documenting every variable kstack interprets, all at defaults.
pub const GLOBALS_YML: &str = include_str!("../templates/globals.yml");

/// README placed in `config/`.
pub const CONFIG_README: &str = include_str!("../templates/config-README.md");

/// passwords.yml with every key kstack knows and empty values.
pub fn passwords_yml() -> String {
    crate::passwords::starter_template()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starter_globals_loads_without_diagnostics_and_documents_every_key() {
        let (g, diags) = crate::load_globals(GLOBALS_YML);
        assert!(diags.is_empty(), "{}", crate::render_plain(&diags));
        assert_eq!(g.unwrap(), kstack_model::globals::Globals::default());
        for key in kstack_model::globals::known_keys() {
            assert!(
                GLOBALS_YML.contains(&format!("#{key}:")),
                "{key} is not documented"
            );
        }
    }
}
