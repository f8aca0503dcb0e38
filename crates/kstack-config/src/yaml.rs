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

/// A carriage return not followed by a line feed: YAML reads it as a line break, editors and
/// kstack's diagnostics count lines by line feeds, so every line number after it would point
/// at the wrong line. Refused, naming where (line and column by line feeds), never the text.
pub(crate) fn lone_carriage_return(file: &str, text: &str) -> Option<Diag> {
    let bytes = text.as_bytes();
    let at = (0..bytes.len()).find(|&i| bytes[i] == b'\r' && bytes.get(i + 1) != Some(&b'\n'))?;
    let before = &text[..at];
    let line = before.matches('\n').count() as u64 + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u64 + 1;
    Some(
        Diag::new(
            Severity::Error,
            file,
            "a carriage return without a line feed (old Mac line ending)",
        )
        .at(line, column)
        .help(format!(
            "save {file} with Unix (LF) or Windows (CRLF) line endings, e.g. `sed -i 's/\\r$//; s/\\r/\\n/g' {file}`"
        )),
    )
}

/// Parses `text` as a mapping of top-level keys, sorted by position in the file.
///
/// With `secret` set, a parse error says only where the problem is, never what the text was.
pub(crate) fn parse_entries(file: &str, text: &str, secret: bool) -> Result<Vec<Entry>, Vec<Diag>> {
    type Map = HashMap<Spanned<String>, Spanned<Value>>;
    if let Some(d) = lone_carriage_return(file, text) {
        return Err(vec![d]);
    }
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
            let diags = yaml11_disagreements(file, text, secret);
            if diags.is_empty() {
                Ok(entries)
            } else {
                Err(diags)
            }
        }
        Err(err) => {
            let loc = err.location().unwrap_or(Location::UNKNOWN);
            if err.to_string().contains("duplicate mapping key")
                && let Some((key, first)) = duplicate_key(text, loc.line())
            {
                // Key names are not secret: say which key, and both lines.
                return Err(vec![
                    Diag::new(
                        Severity::Error,
                        file,
                        format!("set twice: on line {first} and again here"),
                    )
                    .at(loc.line(), loc.column())
                    .field(key)
                    .help(format!(
                        "keep one of the two lines (the value you mean): kstack does not guess which one {file} means"
                    )),
                ]);
            }
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

/// What an unquoted scalar means to YAML 1.1 (kolla-ansible reads its files with PyYAML,
/// which speaks 1.1) when YAML 1.2 (kstack's parser) reads it otherwise, if it does: `010` is 8
/// there and 10 here, `1e3` a string there and 1000.0 here, `0o17` a string there, `1_000` and
/// `1:30` numbers there and strings here. Booleans (`yes`, `on`, ...) are left alone: kstack
/// reads them as kolla-ansible's `bool` does.
fn yaml11_meaning(raw: &str) -> Option<&'static str> {
    let body = raw.strip_prefix(['-', '+']).unwrap_or(raw);
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if body.len() > 1 && body.starts_with('0') && digits(body) {
        Some("an octal number in YAML 1.1 (kolla-ansible), a decimal one in YAML 1.2")
    } else if body
        .strip_prefix("0o")
        .is_some_and(|o| !o.is_empty() && o.bytes().all(|b| (b'0'..=b'7').contains(&b)))
    {
        Some("a string in YAML 1.1 (kolla-ansible), an octal number in YAML 1.2")
    } else if body.starts_with(|c: char| c.is_ascii_digit())
        && body.contains(['e', 'E'])
        && body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
    {
        Some("a string or another number in YAML 1.1 (kolla-ansible), a float in YAML 1.2")
    } else if body.contains('_')
        && body.starts_with(|c: char| c.is_ascii_digit())
        && body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'_' | b'.'))
    {
        Some("a number in YAML 1.1 (kolla-ansible), a string in YAML 1.2")
    } else if body.contains(':')
        && body.split(':').all(digits)
        && body.split(':').skip(1).all(|p| p.len() <= 2)
    {
        Some("a base-60 number in YAML 1.1 (kolla-ansible), a string in YAML 1.2")
    } else {
        None
    }
}

/// One open collection while walking the events of a document.
enum Frame {
    /// A mapping, with the path of its next value once its key was read.
    Mapping {
        path: String,
        key: Option<String>,
    },
    Sequence {
        path: String,
        index: usize,
    },
}

impl Frame {
    /// The path of the node that comes next in this collection (`key`, `parent.key`,
    /// `parent[i]`); `None` where a mapping's key comes next.
    fn next_path(&self) -> Option<String> {
        match self {
            Frame::Mapping { key: None, .. } => None,
            Frame::Mapping {
                path, key: Some(k), ..
            } if path.is_empty() => Some(k.clone()),
            Frame::Mapping {
                path, key: Some(k), ..
            } => Some(format!("{path}.{k}")),
            Frame::Sequence { path, index } => Some(format!("{path}[{index}]")),
        }
    }

    /// A node of this collection was read: a mapping's key or value, a sequence's item.
    fn advance(&mut self, scalar: Option<&str>) {
        match self {
            Frame::Mapping { key, .. } => {
                *key = match key {
                    None => Some(scalar.unwrap_or("?").to_owned()),
                    Some(_) => None,
                }
            }
            Frame::Sequence { index, .. } => *index += 1,
        }
    }
}

/// Errors for every value, at any depth (`kstack_timeouts.keystone`, `list[2]`), written as a
/// plain scalar that means one thing to kolla-ansible and another to kstack
/// ([`yaml11_meaning`]); with `secret`, the value is not shown. Keys, quoted and block scalars
/// and explicitly tagged values (`!!str 010`) mean the same to both.
fn yaml11_disagreements(file: &str, text: &str, secret: bool) -> Vec<Diag> {
    use granit_parser::{Event, Parser, ScalarStyle};
    let mut diags = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    for event in Parser::new_from_str(text) {
        // serde-saphyr has parsed this text already; an error here has been reported there.
        let Ok((event, span)) = event else { break };
        match event {
            Event::Scalar(value, style, _, tag) => {
                let Some(frame) = stack.last_mut() else {
                    continue;
                };
                if let Some(path) = frame.next_path()
                    && style == ScalarStyle::Plain
                    && tag.is_none()
                    && let Some(meaning) = yaml11_meaning(&value)
                {
                    let shown = if secret {
                        "the value".to_owned()
                    } else {
                        format!("`{value}`")
                    };
                    diags.push(
                        Diag::new(
                            Severity::Error,
                            file,
                            format!(
                                "{shown} is {meaning}: kolla-ansible and kstack would read different values"
                            ),
                        )
                        .at(span.start.line() as u64, span.start.col() as u64 + 1)
                        .field(path)
                        .help("quote the value (`key: \"...\"`) to mean the characters as written, or write the number plainly (`8`, `1000`)"),
                    );
                }
                frame.advance(Some(&value));
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let path = match stack.last() {
                    Some(frame) => frame.next_path().unwrap_or_else(|| "?".into()),
                    None => String::new(),
                };
                stack.push(match event {
                    Event::MappingStart(..) => Frame::Mapping { path, key: None },
                    _ => Frame::Sequence { path, index: 0 },
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
                if let Some(parent) = stack.last_mut() {
                    parent.advance(None);
                }
            }
            Event::Alias(_) => {
                if let Some(frame) = stack.last_mut() {
                    frame.advance(None);
                }
            }
            _ => {}
        }
    }
    diags
}

/// The top-level key written on line `line` (1-based) and the earlier line that sets it too.
fn duplicate_key(text: &str, line: u64) -> Option<(String, u64)> {
    let key_of = |l: &str| -> Option<String> {
        if l.starts_with([' ', '\t', '#', '-']) {
            return None;
        }
        let (k, _) = l.split_once(':')?;
        let k = k.trim();
        let k = k
            .strip_prefix('"')
            .and_then(|k| k.strip_suffix('"'))
            .or_else(|| k.strip_prefix('\'').and_then(|k| k.strip_suffix('\'')))
            .unwrap_or(k);
        (!k.is_empty()).then(|| k.to_owned())
    };
    let lines: Vec<&str> = text.lines().collect();
    let at = usize::try_from(line).ok()?.checked_sub(1)?;
    let key = key_of(lines.get(at)?)?;
    let first = lines[..at]
        .iter()
        .position(|l| key_of(l).as_deref() == Some(key.as_str()))?;
    Some((key, u64::try_from(first + 1).ok()?))
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
