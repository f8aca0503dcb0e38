//! One diagnostic type for every problem found while loading a config directory.
//!
//! A diagnostic names the file, line, column and field, says what is wrong and what to do.
//! Diagnostics about `passwords.yml` never carry the source text, so the graphical report
//! cannot echo a secret.
use std::fmt;

use miette::{LabeledSpan, NamedSource, SourceSpan};

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

/// A problem in one config file.
#[derive(Debug, Clone)]
pub struct Diag {
    pub severity: Severity,
    /// File name relative to the config directory, e.g. `globals.yml`.
    pub file: String,
    /// 1-based line; 0 when the problem concerns the whole file.
    pub line: u64,
    /// 1-based column; 0 when unknown.
    pub column: u64,
    /// The variable or field path, e.g. `enable_nova` or `kstack_replicas.nova`.
    pub field: Option<String>,
    pub message: String,
    pub help: Option<String>,
    pub(crate) source: Option<NamedSource<String>>,
    pub(crate) span: Option<SourceSpan>,
    pub(crate) label: Option<String>,
}

impl Diag {
    pub(crate) fn new(severity: Severity, file: &str, message: impl Into<String>) -> Self {
        Diag {
            severity,
            file: file.to_owned(),
            line: 0,
            column: 0,
            field: None,
            message: message.into(),
            help: None,
            source: None,
            span: None,
            label: None,
        }
    }

    pub(crate) fn at(mut self, line: u64, column: u64) -> Self {
        self.line = line;
        self.column = column;
        self
    }

    pub(crate) fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub(crate) fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Attaches the file text and a labelled byte range. Never used for passwords.yml.
    pub(crate) fn snippet(
        mut self,
        text: &str,
        span: SourceSpan,
        label: impl Into<String>,
    ) -> Self {
        self.source = Some(NamedSource::new(self.file.clone(), text.to_owned()));
        self.span = Some(span);
        self.label = Some(label.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if self.line > 0 {
            write!(f, ":{}", self.line)?;
            if self.column > 0 {
                write!(f, ":{}", self.column)?;
            }
        }
        write!(f, ": ")?;
        if let Some(field) = &self.field {
            write!(f, "`{field}`: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for Diag {}

impl miette::Diagnostic for Diag {
    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.severity {
            Severity::Warning => miette::Severity::Warning,
            Severity::Error => miette::Severity::Error,
        })
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.source.as_ref().map(|s| s as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let span = self.span?;
        Some(Box::new(std::iter::once(LabeledSpan::new_with_span(
            self.label.clone(),
            span,
        ))))
    }
}

/// Renders diagnostics as miette graphical reports without colour (for tests and logs).
pub fn render_plain(diags: &[Diag]) -> String {
    let handler =
        miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
            .with_width(100);
    let mut out = String::new();
    for d in diags {
        // Writing into a String cannot fail.
        let _ = handler.render_report(&mut out, d);
        out.push('\n');
    }
    out
}
