//! Snippets and imports, at the token level as Caddy does: a top-level
//! `(name) { ... }` defines a snippet (before its first use), and a line
//! `import X` is replaced by snippet `X`'s tokens or by the tokens of the
//! files the glob `X` names ([`Files`]). A glob that names no file is a
//! note, as in CoreDNS; a plain path that names none is an error.

use super::lexer::{lex, Token};
use super::{Files, ParseError};
use std::collections::HashMap;

/// Imports nest at most this deep (a cycle would go on for ever).
const MAX_DEPTH: usize = 10;

pub(crate) struct Expander<'a> {
    files: &'a dyn Files,
    env: &'a dyn Fn(&str) -> Option<String>,
    snippets: HashMap<String, Vec<Token>>,
    next_group: u32,
    /// Globs that named no file, as notes.
    pub(crate) notes: Vec<String>,
}

impl<'a> Expander<'a> {
    pub(crate) fn new(files: &'a dyn Files, env: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Expander {
            files,
            env,
            snippets: HashMap::new(),
            next_group: 1,
            notes: Vec::new(),
        }
    }

    /// `tokens` with snippet definitions taken out and imports replaced.
    /// `stack` names the imports being expanded (for cycles).
    pub(crate) fn expand(
        &mut self,
        tokens: Vec<Token>,
        stack: &mut Vec<String>,
    ) -> Result<Vec<Token>, ParseError> {
        let mut out = Vec::with_capacity(tokens.len());
        let mut depth = 0usize;
        let mut i = 0;
        while i < tokens.len() {
            let t = &tokens[i];
            let first_on_line = i == 0 || !tokens[i - 1].same_line(t);
            let line_end = line_end(&tokens, i);
            if first_on_line && depth == 0 && is_snippet_name(t) {
                i = self.define(&tokens, i)?;
                continue;
            }
            if first_on_line && t.is("import") {
                let args = &tokens[i + 1..line_end];
                let Some(pattern) = args.first() else {
                    return Err(ParseError::at(
                        &t.pos,
                        "import needs a snippet name or a file glob",
                    ));
                };
                out.extend(self.import(t, &pattern.text, stack)?);
                i = line_end;
                continue;
            }
            if t.is("{") {
                depth += 1;
            } else if t.is("}") {
                depth = depth.saturating_sub(1);
            }
            out.push(t.clone());
            i += 1;
        }
        Ok(out)
    }

    /// Stores the snippet whose name is `tokens[at]`; returns where its
    /// definition ends.
    fn define(&mut self, tokens: &[Token], at: usize) -> Result<usize, ParseError> {
        let name_token = &tokens[at];
        let name = name_token.text[1..name_token.text.len() - 1].to_owned();
        let open = tokens
            .get(at + 1)
            .filter(|t| t.is("{") && name_token.same_line(t));
        if open.is_none() {
            return Err(ParseError::at(
                &name_token.pos,
                &format!("snippet ({name}) needs '{{' on its line"),
            ));
        }
        let mut depth = 0usize;
        for (j, t) in tokens.iter().enumerate().skip(at + 1) {
            if t.is("{") {
                depth += 1;
            } else if t.is("}") {
                depth -= 1;
                if depth == 0 {
                    self.snippets.insert(name, tokens[at + 2..j].to_vec());
                    return Ok(j + 1);
                }
            }
        }
        Err(ParseError::at(
            &name_token.pos,
            &format!("snippet ({name}): '{{' is never closed"),
        ))
    }

    /// The tokens `import <pattern>` at `at` stands for.
    fn import(
        &mut self,
        at: &Token,
        pattern: &str,
        stack: &mut Vec<String>,
    ) -> Result<Vec<Token>, ParseError> {
        if stack.len() >= MAX_DEPTH || stack.iter().any(|s| s == pattern) {
            return Err(ParseError::at(
                &at.pos,
                &format!("import {pattern}: imports nest too deep (an import cycle?)"),
            ));
        }
        let sources = if let Some(snippet) = self.snippets.get(pattern) {
            vec![snippet.clone()]
        } else {
            let files = (self.files.glob(pattern)).map_err(|e| ParseError::at(&at.pos, &e))?;
            if files.is_empty() {
                if !pattern.contains(['*', '?', '[']) {
                    return Err(ParseError::at(
                        &at.pos,
                        &format!("import {pattern}: no such snippet or file"),
                    ));
                }
                self.notes.push(format!(
                    "{}:{}: import {pattern} matched no file (CoreDNS skips it too)",
                    at.pos.file, at.pos.line
                ));
            }
            (files.iter())
                .map(|f| lex(&f.label, &f.text, self.env))
                .collect::<Result<_, _>>()?
        };
        stack.push(pattern.to_owned());
        let mut out = Vec::new();
        for tokens in sources {
            let group = self.next_group;
            self.next_group += 1;
            let tokens = tokens.into_iter().map(|t| Token { group, ..t }).collect();
            out.extend(self.expand(tokens, stack)?);
        }
        stack.pop();
        Ok(out)
    }
}

/// The index just past the last token on `tokens[at]`'s line.
pub(crate) fn line_end(tokens: &[Token], at: usize) -> usize {
    let mut end = at + 1;
    while end < tokens.len() && tokens[end - 1].same_line(&tokens[end]) {
        end += 1;
    }
    end
}

fn is_snippet_name(t: &Token) -> bool {
    !t.quoted && t.text.len() > 2 && t.text.starts_with('(') && t.text.ends_with(')')
}
