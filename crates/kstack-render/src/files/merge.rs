//! The operator's override files (`config/`) merged over the rendered INI files: each parsed
//! once per render, checked first, and a file an override sets a credential in made secret.
use std::collections::BTreeMap;

use kstack_config::Config;
use kstack_config::overrides::{self, Ini};

use super::RenderError;

/// Parsed override files, parsed once per render.
pub(super) struct OverrideSet<'a> {
    raw: &'a BTreeMap<String, Vec<u8>>,
    parsed: BTreeMap<&'a str, Ini>,
}

impl<'a> OverrideSet<'a> {
    pub(super) fn new(raw: &'a BTreeMap<String, Vec<u8>>) -> OverrideSet<'a> {
        OverrideSet {
            raw,
            parsed: BTreeMap::new(),
        }
    }

    fn get(&mut self, path: &str) -> Result<Option<&Ini>, RenderError> {
        let Some((key, bytes)) = self.raw.get_key_value(path) else {
            return Ok(None);
        };
        if !self.parsed.contains_key(key.as_str()) {
            let file = format!("{}/{path}", overrides::DIR);
            let text = std::str::from_utf8(bytes).map_err(|_| RenderError::Override {
                file: file.clone(),
                line: 0,
                message: "the file is not UTF-8 text".into(),
            })?;
            let ini = Ini::parse_override(text).map_err(|e| RenderError::Override {
                file,
                line: e.line,
                message: e.message,
            })?;
            self.parsed.insert(key.as_str(), ini);
        }
        Ok(self.parsed.get(key.as_str()))
    }

    /// `content` with the existing files of `sources` merged over it, in order; unchanged
    /// (byte for byte) when none exists. The flag says whether an override sets what looks
    /// like a credential ([`Ini::credentials`]): the merged file is then secret too.
    pub(super) fn apply(
        &mut self,
        template: &str,
        content: String,
        sources: &[String],
    ) -> Result<(String, bool), RenderError> {
        let mut layers = Vec::new();
        for s in sources {
            if let Some(ini) = self.get(s)? {
                layers.push(ini.clone());
            }
        }
        if layers.is_empty() {
            return Ok((content, false));
        }
        let credentials = layers.iter().any(|l| !l.credentials().is_empty());
        let mut base = Ini::parse(&content).map_err(|e| RenderError::Template {
            template: template.to_owned(),
            line: e.line,
            message: format!(
                "the rendered file is not INI, so overrides cannot merge: {}",
                e.message
            ),
        })?;
        for l in &layers {
            base.merge(l);
        }
        Ok((base.to_text(), credentials))
    }
}

/// The first error among the override checks (layout, per-host overrides of services that are
/// not DaemonSets, INI syntax), as a [`RenderError`].
pub(super) fn check_overrides(config: &Config) -> Result<(), RenderError> {
    let verbatim = overrides::verbatim_files(&config.globals);
    let diags = overrides::check(&config.catalog, &config.overrides, &verbatim);
    match diags.into_iter().find(kstack_config::Diag::is_error) {
        Some(d) => Err(RenderError::Override {
            file: d.file,
            line: usize::try_from(d.line).unwrap_or(0),
            message: d.message,
        }),
        None => Ok(()),
    }
}
