//! How a value is written into each format kstack renders, so that the program reading the
//! file gets the value back exactly, whatever characters it holds (a password may hold any
//! printable character; control characters are refused before rendering).
//!
//! One function per format, used by the template filters of the same name ([`crate::files`])
//! and by the files the bootstrap tasks generate ([`crate::tasks`]). JSON (and so YAML and
//! Python string literals, of which JSON strings are a subset) is written by `tojson` /
//! `serde_json`; shell words by [`crate::tasks::shell_word`].

/// A value of an oslo.config INI file (`key = <value>`).
///
/// oslo.config's parser (`oslo_config/iniparser.py`, `_split_key_value`) strips the value and
/// then one pair of matching quotes around it (`"x"` and `'x'` read as `x`, and a lone `"`
/// as empty); its option values then read `$name` as a reference to another option, after
/// turning every `\$` into `$$` (`ConfigOpts._substitute`). So a `$` is doubled, except one
/// that follows a backslash: that backslash is doubled and the `$` kept (`\$` → `\\$`, which
/// oslo.config turns into `\$$` and then `\$`). A value with space at either end, or starting
/// and ending with the same quote, is wrapped in double quotes, which the parser removes again.
pub fn oslo(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    let mut prev = None;
    for c in s.chars() {
        match (c, prev) {
            ('$', Some('\\')) => out.push_str("\\$"),
            ('$', _) => out.push_str("$$"),
            (c, _) => out.push(c),
        }
        prev = Some(c);
    }
    let s = out;
    let first = s.chars().next();
    let last = s.chars().next_back();
    let padded = first.is_some_and(char::is_whitespace) || last.is_some_and(char::is_whitespace);
    let quoted = matches!(first, Some('"' | '\'')) && first == last;
    if padded || quoted {
        format!("\"{s}\"")
    } else {
        s
    }
}

/// A MariaDB/MySQL string literal: single quotes, `\` and `'` escaped with a backslash (the
/// server's default `sql_mode`, without `NO_BACKSLASH_ESCAPES`).
pub fn sql(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A value of a MySQL/MariaDB option file (`my.cnf`, `client.cnf`): double-quoted, `\` and `"`
/// escaped. Unquoted, a `#` would start a comment, space at the ends would be trimmed and
/// backslash sequences (`\n`, `\s`, ...) would be read as escapes.
pub fn option_file(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A string value of a GLib key file (libvirt's `auth.conf`): `\` doubled and every space
/// written `\s` (the reader skips space after `=` and trims the end of the line). `#` starts a
/// comment only at the start of a line.
pub fn keyfile(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            ' ' => out.push_str("\\s"),
            c => out.push(c),
        }
    }
    out
}

/// The user or password of a URL's user info: everything but RFC 3986's unreserved characters
/// percent-encoded, so no `:`, `@`, `/`, `?` or `#` of the value ends the part early.
pub fn url_userinfo(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// oslo.config's reading of one `key = value` line's value (`iniparser.py`
    /// `_split_key_value`, then `\$` → `$$` and `$$` → `$` of its template substitution).
    fn oslo_reads(written: &str) -> String {
        let v = written.trim();
        let v = if !v.is_empty()
            && v.chars().next() == v.chars().next_back()
            && v.starts_with(['"', '\''])
        {
            let mut c = v.chars();
            c.next();
            c.next_back();
            c.as_str()
        } else {
            v
        };
        v.replace("\\$", "$$").replace("$$", "$")
    }

    /// MariaDB's reading of an option value (`my_default.c`: comment removal outside quotes,
    /// the end trimmed, one pair of quotes removed, backslash escapes).
    fn option_file_reads(written: &str) -> String {
        let mut v = written.trim();
        if v.len() > 1 && v.starts_with('"') && v.ends_with('"') {
            v = &v[1..v.len() - 1];
        }
        let mut out = String::new();
        let mut it = v.chars();
        while let Some(c) = it.next() {
            if c == '\\' {
                match it.next() {
                    Some('\\') => out.push('\\'),
                    Some('"') => out.push('"'),
                    Some('\'') => out.push('\''),
                    Some('s') => out.push(' '),
                    Some(o) => {
                        out.push('\\');
                        out.push(o);
                    }
                    None => out.push('\\'),
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    const HARD: &[&str] = &[
        "plain",
        "",
        "\"",
        "'",
        "\"quoted\"",
        "'single'",
        " lead",
        "trail ",
        "a$b$$c${x}",
        "a;b #c",
        "back\\slash\\n",
        "\"mixed'",
        "é ß 中",
        "%41{{ x }}",
        "abc\\$x",
        "\\$",
        "\\\\$$",
        "a\\$$b\\",
    ];

    #[test]
    fn oslo_values_read_back_exactly() {
        for v in HARD {
            assert_eq!(oslo_reads(&oslo(v)), *v, "{v:?} written {:?}", oslo(v));
        }
        assert_eq!(oslo("plain"), "plain", "plain values are unchanged");
    }

    #[test]
    fn option_file_values_read_back_exactly() {
        for v in HARD {
            assert_eq!(option_file_reads(&option_file(v)), *v, "{v:?}");
        }
    }

    #[test]
    fn keyfile_and_sql_and_url_forms() {
        assert_eq!(keyfile(" a\\b c "), "\\sa\\\\b\\sc\\s");
        assert_eq!(sql("it's a \\"), "'it\\'s a \\\\'");
        assert_eq!(
            url_userinfo("a@b:c/d?e#f%g h"),
            "a%40b%3Ac%2Fd%3Fe%23f%25g%20h"
        );
        assert_eq!(url_userinfo("Abc-9_.~"), "Abc-9_.~");
    }
}
