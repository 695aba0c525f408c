//! Tokens to server blocks, as Caddy v1 (CoreDNS's fork) parses them: keys
//! up to `{` (a key ending in `,` continues on the next line), then one
//! directive per line, each with its arguments and at most one nested
//! `{ ... }` of sub-directives. A file whose only block has no braces is
//! one block running to the end of the file.

use super::expand::line_end;
use super::lexer::Token;
use super::{Directive, ParseError, ServerBlock};

pub(crate) fn parse(
    tokens: &[Token],
    source: &dyn Fn(&Token) -> String,
) -> Result<Vec<ServerBlock>, ParseError> {
    let mut blocks: Vec<ServerBlock> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        if t.is("{") || t.is("}") {
            return Err(ParseError::at(
                &t.pos,
                &format!("unexpected '{}' outside a server block", t.text),
            ));
        }
        let (keys, next) = keys(tokens, i)?;
        let mut block = ServerBlock {
            keys,
            pos: t.pos.clone(),
            text: source(t),
            directives: Vec::new(),
        };
        if tokens.get(next).is_some_and(|t| t.is("{")) {
            i = directives(tokens, next + 1, &mut block, source, Some(&tokens[next]))?;
        } else if blocks.is_empty() {
            // Caddy: the only server block may omit its braces.
            i = directives(tokens, next, &mut block, source, None)?;
        } else {
            return Err(ParseError::at(
                &t.pos,
                &format!(
                    "{:?} is outside any server block (a directive after a block's '}}', or a \
                     server block without '{{': only a file's only block may omit its braces)",
                    t.text
                ),
            ));
        }
        blocks.push(block);
    }
    Ok(blocks)
}

/// The keys starting at `at`, and the index after them.
fn keys(tokens: &[Token], at: usize) -> Result<(Vec<String>, usize), ParseError> {
    let mut keys = Vec::new();
    let mut i = at;
    let mut another = false;
    loop {
        let t = &tokens[i];
        if t.is("{") {
            break;
        }
        let text = t.text.trim_end_matches(',');
        another = t.text.ends_with(',');
        for key in text.split(',') {
            if key.is_empty() {
                return Err(ParseError::at(&t.pos, "empty server block key"));
            }
            keys.push(key.to_owned());
        }
        i += 1;
        match tokens.get(i) {
            None if another => return Err(ParseError::at(&t.pos, "a key list ends with ','")),
            None => break,
            Some(next) if !another && !t.same_line(next) => break,
            Some(_) => {}
        }
    }
    if another {
        return Err(ParseError::at(
            &tokens[i].pos,
            "empty server block key (a ',' before '{')",
        ));
    }
    Ok((keys, i))
}

/// Directives from `at` to the block's `}` (`open` given) or the end of the
/// tokens; returns the index after the block.
fn directives(
    tokens: &[Token],
    mut at: usize,
    block: &mut ServerBlock,
    source: &dyn Fn(&Token) -> String,
    open: Option<&Token>,
) -> Result<usize, ParseError> {
    while at < tokens.len() {
        let t = &tokens[at];
        if t.is("}") {
            if open.is_none() {
                return Err(ParseError::at(&t.pos, "unexpected '}': no '{' is open"));
            }
            return Ok(at + 1);
        }
        if t.is("{") {
            return Err(ParseError::at(
                &t.pos,
                "unexpected '{': a block opens at the end of a directive's line",
            ));
        }
        let (directive, next) = directive(tokens, at, source)?;
        block.directives.push(directive);
        at = next;
    }
    match open {
        Some(open) => Err(ParseError::at(
            &open.pos,
            &format!("this '{{' of {:?} is never closed", block.keys.join(" ")),
        )),
        None => Ok(at),
    }
}

/// One directive at `at`: its line, and a nested block if the line ends in
/// `{`. Returns it and the index after it.
fn directive(
    tokens: &[Token],
    at: usize,
    source: &dyn Fn(&Token) -> String,
) -> Result<(Directive, usize), ParseError> {
    let end = line_end(tokens, at);
    let t = &tokens[at];
    let mut d = Directive {
        name: t.text.clone(),
        args: Vec::new(),
        pos: t.pos.clone(),
        text: source(t),
        block: None,
    };
    for (j, arg) in tokens.iter().enumerate().take(end).skip(at + 1) {
        if arg.is("}") {
            return Err(ParseError::at(
                &arg.pos,
                "unexpected '}': a closing brace starts its own line",
            ));
        }
        if arg.is("{") {
            let (body, next) = nested(tokens, j, source)?;
            d.block = Some(body);
            return Ok((d, next));
        }
        d.args.push(arg.text.clone());
    }
    Ok((d, end))
}

/// The sub-directives of the block opened at `open`, one per line, up to
/// its `}`; returns them and the index after the `}`.
fn nested(
    tokens: &[Token],
    open: usize,
    source: &dyn Fn(&Token) -> String,
) -> Result<(Vec<Directive>, usize), ParseError> {
    let mut body: Vec<Directive> = Vec::new();
    let mut i = open + 1;
    while i < tokens.len() {
        let t = &tokens[i];
        if t.is("}") {
            return Ok((body, i + 1));
        }
        if t.is("{") {
            return Err(ParseError::at(
                &t.pos,
                "a block nested deeper than allowed: a plugin's options take no block of their own",
            ));
        }
        let continues =
            body.last().is_some() && tokens[i - 1].same_line(t) && !tokens[i - 1].is("{");
        match body.last_mut() {
            Some(last) if continues => last.args.push(t.text.clone()),
            _ => body.push(Directive {
                name: t.text.clone(),
                args: Vec::new(),
                pos: t.pos.clone(),
                text: source(t),
                block: None,
            }),
        }
        i += 1;
    }
    Err(ParseError::at(
        &tokens[open].pos,
        "this '{' is never closed",
    ))
}
