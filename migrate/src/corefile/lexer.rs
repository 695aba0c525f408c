//! The Caddyfile lexer CoreDNS uses: whitespace-separated tokens, `#`
//! comments from the start of a token to the end of the line, `"..."`
//! quoted tokens (with `\"`, spanning spaces and lines), and the
//! environment substitutions `{$VAR}` and `{%VAR%}` in every token.

use super::{ParseError, Pos};

/// One token, where it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) text: String,
    /// Written in quotes: never a brace, an `import` or a snippet name.
    pub(crate) quoted: bool,
    pub(crate) pos: Pos,
    /// The line the token ends on (a quoted token may span lines).
    pub(crate) end_line: usize,
    /// Which expansion the token came from: tokens of one import share it,
    /// so that two imports of the same one-line snippet stay two lines.
    pub(crate) group: u32,
}

impl Token {
    /// An unquoted `{`, `}` or other exact text.
    pub(crate) fn is(&self, text: &str) -> bool {
        !self.quoted && self.text == text
    }

    /// Whether `next` continues this token's line (same file, expansion
    /// and line).
    pub(crate) fn same_line(&self, next: &Token) -> bool {
        self.group == next.group && self.pos.file == next.pos.file && self.end_line == next.pos.line
    }
}

/// Splits `text` (the file `file`) into tokens; `env` looks variables up.
pub(crate) fn lex(
    file: &str,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Token>, ParseError> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1;
    while let Some(&c) = chars.peek() {
        if c == '\n' {
            line += 1;
            chars.next();
        } else if c.is_whitespace() {
            chars.next();
        } else if c == '#' {
            while chars.peek().is_some_and(|&c| c != '\n') {
                chars.next();
            }
        } else if c == '"' {
            chars.next();
            let start = line;
            let mut value = String::new();
            loop {
                match chars.next() {
                    None => return Err(ParseError::new(file, start, "unterminated quoted string")),
                    Some('"') => break,
                    Some('\\') if chars.peek() == Some(&'"') => {
                        chars.next();
                        value.push('"');
                    }
                    Some(c) => {
                        if c == '\n' {
                            line += 1;
                        }
                        value.push(c);
                    }
                }
            }
            tokens.push(token(file, start, line, value, true, env)?);
        } else {
            let mut value = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                value.push(c);
                chars.next();
            }
            tokens.push(token(file, line, line, value, false, env)?);
        }
    }
    Ok(tokens)
}

fn token(
    file: &str,
    line: usize,
    end_line: usize,
    text: String,
    quoted: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Token, ParseError> {
    let text = substitute(&text, env).map_err(|name| {
        ParseError::new(
            file,
            line,
            &format!(
                "environment variable {name} is not set (CoreDNS would put an empty string \
                 there; set it, or write the value)"
            ),
        )
    })?;
    Ok(Token {
        text,
        quoted,
        pos: Pos {
            file: file.to_owned(),
            line,
        },
        end_line,
        group: 0,
    })
}

/// Replaces `{$NAME}` and `{%NAME%}` with the variable's value; `Err` names
/// an unset variable. Text that only looks like the start of one stays.
fn substitute(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('{') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let name = if let Some(body) = tail.strip_prefix("{$") {
            body.find('}').map(|end| (&body[..end], end + 3))
        } else if let Some(body) = tail.strip_prefix("{%") {
            body.find("%}").map(|end| (&body[..end], end + 4))
        } else {
            None
        };
        match name {
            Some((name, len)) if is_var_name(name) => {
                out.push_str(&env(name).ok_or_else(|| name.to_owned())?);
                rest = &tail[len..];
            }
            _ => {
                out.push('{');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn is_var_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
