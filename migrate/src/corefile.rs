//! The Corefile (Caddyfile) grammar: [`parse`] turns a Corefile and the
//! files it imports ([`Files`]) into server blocks of directives, each with
//! its arguments, nested sub-directives and the file and line it was
//! written on, or a [`ParseError`] naming the file and line at fault.

mod blocks;
mod expand;
mod lexer;

use std::collections::HashMap;

/// Where something was written: a file's label and a 1-based line.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    pub file: String,
    pub line: usize,
}

/// A malformed Corefile: what is wrong, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct ParseError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl ParseError {
    /// An error at `line` of `file`.
    pub fn new(file: &str, line: usize, message: &str) -> Self {
        ParseError {
            file: file.to_owned(),
            line,
            message: message.to_owned(),
        }
    }

    pub(crate) fn at(pos: &Pos, message: &str) -> Self {
        ParseError::new(&pos.file, pos.line, message)
    }
}

/// A file's text and the label messages name it by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub label: String,
    pub text: String,
}

/// The files an `import` glob names.
pub trait Files {
    /// The files `pattern` matches, in name order; `Err` when they cannot
    /// be read.
    fn glob(&self, pattern: &str) -> Result<Vec<Source>, String>;
}

/// A plugin line (or a sub-directive of its block).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Directive {
    pub name: String,
    pub args: Vec<String>,
    pub pos: Pos,
    /// The line as written, trimmed.
    pub text: String,
    /// The sub-directives of a `{ ... }` at the end of the line.
    pub block: Option<Vec<Directive>>,
}

/// A server block: its keys (`.:53`, `dns://example.org`) and plugins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerBlock {
    pub keys: Vec<String>,
    pub pos: Pos,
    /// The first line of the block, as written.
    pub text: String,
    pub directives: Vec<Directive>,
}

/// A parsed Corefile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Corefile {
    pub blocks: Vec<ServerBlock>,
    /// Import globs that matched nothing.
    pub notes: Vec<String>,
}

/// Parses `main`, expanding its snippets and imports (files from `files`,
/// `{$VAR}` from `env`).
pub fn parse(
    main: &Source,
    files: &dyn Files,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Corefile, ParseError> {
    let texts = std::cell::RefCell::new(HashMap::new());
    let recording = Recording {
        files,
        texts: &texts,
    };
    texts
        .borrow_mut()
        .insert(main.label.clone(), main.text.clone());
    let tokens = lexer::lex(&main.label, &main.text, env)?;
    let mut expander = expand::Expander::new(&recording, env);
    let tokens = expander.expand(tokens, &mut Vec::new())?;
    let texts = texts.borrow();
    let line_of = |t: &lexer::Token| {
        (texts.get(&t.pos.file))
            .and_then(|text| text.lines().nth(t.pos.line - 1))
            .map_or_else(|| t.text.clone(), |line| line.trim().to_owned())
    };
    let blocks = blocks::parse(&tokens, &line_of)?;
    Ok(Corefile {
        blocks,
        notes: expander.notes,
    })
}

/// [`Files`] that keeps the text of every file it returns, for the lines
/// of directives.
struct Recording<'a> {
    files: &'a dyn Files,
    texts: &'a std::cell::RefCell<HashMap<String, String>>,
}

impl Files for Recording<'_> {
    fn glob(&self, pattern: &str) -> Result<Vec<Source>, String> {
        let found = self.files.glob(pattern)?;
        let mut texts = self.texts.borrow_mut();
        for f in &found {
            texts.insert(f.label.clone(), f.text.clone());
        }
        Ok(found)
    }
}

/// Whether `name` matches the shell glob `pattern` (`*`, `?`, `[...]`,
/// `[!...]`), as Go's `filepath.Match` for one path element.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    match_from(&p, &n)
}

fn match_from(p: &[char], n: &[char]) -> bool {
    match p.first() {
        None => n.is_empty(),
        Some('*') => (0..=n.len()).any(|skip| match_from(&p[1..], &n[skip..])),
        Some('?') => !n.is_empty() && match_from(&p[1..], &n[1..]),
        Some('[') => match (n.first(), class_end(p)) {
            (Some(&c), Some(end)) => in_class(&p[1..end], c) && match_from(&p[end + 1..], &n[1..]),
            _ => false,
        },
        Some(&c) => n.first() == Some(&c) && match_from(&p[1..], &n[1..]),
    }
}

/// The index of the `]` closing the class that opens `p`.
fn class_end(p: &[char]) -> Option<usize> {
    (2..p.len()).find(|&i| p[i] == ']')
}

fn in_class(class: &[char], c: char) -> bool {
    let (negated, class) = match class.first() {
        Some('!' | '^') => (true, &class[1..]),
        _ => (false, class),
    };
    let mut found = false;
    let mut i = 0;
    while i < class.len() {
        if i + 2 < class.len() && class[i + 1] == '-' {
            found |= class[i] <= c && c <= class[i + 2];
            i += 3;
        } else {
            found |= class[i] == c;
            i += 1;
        }
    }
    found != negated
}

#[cfg(test)]
mod tests;
