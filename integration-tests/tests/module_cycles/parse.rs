//! One source file as the check reads it: its code without comments,
//! literals and `#[cfg(test)]` items, the paths that code names, and the
//! modules it declares for tests only.

/// What a file's code names.
#[derive(Debug, Default)]
pub(crate) struct Named {
    /// Each leaf of each `use` tree.
    pub(crate) uses: Vec<Use>,
    /// Each `crate::`, `super::` or `self::` path outside `use` statements.
    pub(crate) paths: Vec<Vec<String>>,
    /// Child modules declared `#[cfg(test)] mod x;`: test code in a file
    /// of its own.
    pub(crate) test_modules: Vec<String>,
}

/// One leaf of a `use` tree.
#[derive(Debug, PartialEq)]
pub(crate) struct Use {
    /// `a::b::C` as `["a", "b", "C"]` (`self` leaves end at their parent).
    pub(crate) path: Vec<String>,
    /// The name it binds (`C`, or `D` for `C as D`; a glob binds none).
    pub(crate) binds: Option<String>,
    /// Re-exported (`pub use`, `pub(crate) use`, ...).
    pub(crate) public: bool,
}

/// What `text` (a whole source file) names.
pub(crate) fn read(text: &str) -> Named {
    let code = without_comments_and_literals(text);
    let (code, test_modules) = without_test_items(&code);
    let mut named = Named {
        test_modules,
        ..Named::default()
    };
    let mut other = String::new();
    let mut rest = code.as_str();
    while let Some(at) = find_use(rest) {
        let tail = &rest[at + 3..];
        let end = tail.find(';').unwrap_or(tail.len());
        let tree = &tail[..end];
        let path_chars = |c: char| is_ident(c) || ":{},*#".contains(c) || c.is_whitespace();
        if !tree.chars().all(path_chars) {
            other.push_str(&rest[..at + 3]);
            rest = tail;
            continue;
        }
        other.push_str(&rest[..at]);
        let public = is_public(&rest[..at]);
        expand(&normalised(tree), &[], public, &mut named.uses);
        rest = &tail[end..];
    }
    other.push_str(rest);
    named.paths = inline_paths(&other);
    named
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `text` with comments (nested block comments too) removed and string
/// and char literals emptied, so that neither can look like code.
fn without_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let ident_before = i > 0 && is_ident(chars[i - 1]);
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i = past_block_comment(&chars, i);
        } else if c == '"' {
            i = past_string(&chars, i + 1);
            out.push_str("\"\"");
        } else if (c == 'r' || c == 'b') && !ident_before && raw_string_start(&chars, i).is_some() {
            let (hashes, open) = raw_string_start(&chars, i).unwrap_or_default();
            i = past_raw_string(&chars, open + 1, hashes);
            out.push_str("\"\"");
        } else if c == '\'' && next == Some('\\') {
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn past_block_comment(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0;
    while i < chars.len() {
        if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// Past the `"` that ends a string whose body starts at `i`.
fn past_string(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// `r"`, `r#"`, `br##"`...: the number of `#` and where the `"` is.
fn raw_string_start(chars: &[char], mut i: usize) -> Option<(usize, usize)> {
    if chars[i] == 'b' {
        i += 1;
    }
    if chars.get(i) != Some(&'r') {
        return None;
    }
    i += 1;
    let mut hashes = 0;
    while chars.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    (chars.get(i) == Some(&'"')).then_some((hashes, i))
}

fn past_raw_string(chars: &[char], mut i: usize, hashes: usize) -> usize {
    while i < chars.len() {
        if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        i += 1;
    }
    i
}

/// `code` without the items after `#[cfg(test)]`, and the names of the
/// child modules so declared without a body (`mod helpers;`).
fn without_test_items(code: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut test_modules = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at + "#[cfg(test)]".len()..];
        let end = item_end(item);
        let words: Vec<&str> = item[..end].split_whitespace().collect();
        if let Some(i) = words.iter().position(|w| *w == "mod") {
            if let Some(name) = words.get(i + 1).and_then(|n| n.strip_suffix(';')) {
                test_modules.push(name.to_string());
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    (out, test_modules)
}

/// The end of the item `text` starts with (after its attributes): its `;`
/// or the `}` closing its first `{`, outside brackets and parentheses.
fn item_end(text: &str) -> usize {
    let mut depth = 0i32;
    let mut braces = 0i32;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ';' if depth == 0 && braces == 0 => return i + 1,
            '{' if depth == 0 => braces += 1,
            '}' if depth == 0 => {
                braces -= 1;
                if braces == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// Where the next `use` keyword is (a word of its own, before a blank).
fn find_use(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = code[from..].find("use") {
        let at = from + at;
        let before = code[..at].chars().last();
        let after = code[at + 3..].chars().next();
        if before.is_none_or(|c| !is_ident(c) && c != ':') && after.is_some_and(char::is_whitespace)
        {
            return Some(at);
        }
        from = at + 3;
    }
    None
}

/// Whether the code before a `use` makes it `pub` or `pub(...)`.
fn is_public(before: &str) -> bool {
    let before = before.trim_end();
    if let Some(start) = before.strip_suffix("pub") {
        return !start.ends_with(is_ident);
    }
    before.ends_with(')')
        && before.rfind("pub").is_some_and(|i| {
            let visibility = &before[i..];
            visibility[3..].trim_start().starts_with('(') && !visibility.contains([';', '}'])
        })
}

fn normalised(tree: &str) -> String {
    tree.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The leaves of a `use` tree (`a::{b, c::{d, self}}`: `a::b`, `a::c::d`,
/// `a::c`), appended to `out`.
fn expand(tree: &str, prefix: &[String], public: bool, out: &mut Vec<Use>) {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let (path, alias) = match tree.split_once(" as ") {
            Some((path, alias)) => (path, Some(alias.trim().to_string())),
            None => (tree, None),
        };
        let mut full = prefix.to_vec();
        let leaf = segments(path);
        let glob = path.trim_end().ends_with('*');
        full.extend(
            leaf.into_iter()
                .filter(|s| s != "self" || prefix.is_empty()),
        );
        let binds = if glob {
            None
        } else {
            alias.or_else(|| full.last().cloned())
        };
        out.push(Use {
            path: full,
            binds,
            public,
        });
        return;
    };
    let mut base = prefix.to_vec();
    base.extend(segments(&tree[..open]));
    let close = tree.rfind('}').filter(|close| *close > open);
    let inner = &tree[open + 1..close.unwrap_or(tree.len())];
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                expand(&inner[start..i], &base, public, out);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !inner[start..].trim().is_empty() {
        expand(&inner[start..], &base, public, out);
    }
}

/// `a :: b::r#c::*` as `["a", "b", "c"]`.
pub(crate) fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(|s| s.trim().trim_start_matches("r#"))
        .filter(|s| !s.is_empty() && *s != "*")
        .map(str::to_string)
        .collect()
}

/// Each `crate::`, `super::` or `self::` path in `code`.
fn inline_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start) {
            let begin = from + at;
            from = begin + start.len();
            let before = code[..begin].chars().last();
            if before.is_some_and(|c| is_ident(c) || c == ':' || c == '#') {
                continue; // the end of a longer path or name
            }
            let path: String = code[begin..]
                .chars()
                .take_while(|c| is_ident(*c) || *c == ':' || *c == '#')
                .collect();
            out.push(segments(&path));
        }
    }
    out
}
