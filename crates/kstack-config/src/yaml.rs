//! Parsing a top-level YAML mapping with the location of every key and value.
use std::collections::HashMap;

use serde_json::Value;
use serde_saphyr::{Location, Spanned};

use crate::diagnostic::{Diag, Severity};

/// One top-level `key: value` entry with its locations.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub key: String,
    pub key_loc: Location,
    pub value: Value,
    pub value_loc: Location,
}

/// Parses `text` as a mapping of top-level keys, sorted by position in the file.
///
/// With `secret` set, a parse error says only where the problem is, never what the text was.
pub(crate) fn parse_entries(file: &str, text: &str, secret: bool) -> Result<Vec<Entry>, Vec<Diag>> {
    type Map = HashMap<Spanned<String>, Spanned<Value>>;
    match serde_saphyr::from_str::<Option<Map>>(text) {
        Ok(map) => {
            let mut entries: Vec<Entry> = map
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| Entry {
                    key: k.value,
                    key_loc: k.referenced,
                    value: v.value,
                    value_loc: v.referenced,
                })
                .collect();
            entries.sort_by_key(|e| (e.key_loc.line(), e.key_loc.column()));
            Ok(entries)
        }
        Err(err) => {
            let loc = err.location().unwrap_or(Location::UNKNOWN);
            let mut diag = Diag::new(Severity::Error, file, "")
                .at(loc.line(), loc.column())
                .help(format!(
                    "{file} must be a YAML mapping of `name: value` lines; fix the syntax at this position"
                ));
            if secret {
                diag.message =
                    "this is not valid YAML (the line is not shown because it may hold a secret)"
                        .into();
                diag.help = Some(format!(
                    "{file} must be a YAML mapping of `name: value` lines; look at this position for \
                     a key that appears twice, wrong indentation or an unclosed quote"
                ));
            } else {
                let msg = err.without_snippet().to_string();
                // The location is shown separately; drop the parser's own "at line .." suffix.
                let msg = match msg.rfind(" at line ") {
                    Some(i) => msg[..i].to_owned(),
                    None => msg,
                };
                diag.message = format!("this is not valid YAML: {msg}");
                if let Some(span) = span_of(&loc).or_else(|| span_from_line_col(text, &loc)) {
                    diag = diag.snippet(text, span, "here");
                }
            }
            Err(vec![diag])
        }
    }
}

/// A one-character span at a line/column, for locations without byte offsets.
fn span_from_line_col(text: &str, loc: &Location) -> Option<miette::SourceSpan> {
    let (line, col) = (loc.line() as usize, loc.column() as usize);
    if line == 0 {
        return None;
    }
    let start: usize = text
        .split_inclusive('\n')
        .take(line - 1)
        .map(str::len)
        .sum();
    let line_text = text[start..].split('\n').next().unwrap_or("");
    let offset = line_text
        .char_indices()
        .nth(col.saturating_sub(1))
        .map_or(line_text.len(), |(i, _)| i);
    Some(miette::SourceSpan::new((start + offset).into(), 1))
}

pub(crate) fn span_of(loc: &Location) -> Option<miette::SourceSpan> {
    let span = loc.span();
    let offset = span.byte_offset()?;
    let len = span.byte_len().unwrap_or(0).max(1);
    Some(miette::SourceSpan::new(
        (offset as usize).into(),
        len as usize,
    ))
}
