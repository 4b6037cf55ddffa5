//! A linear pre-scan of YAML nesting depth and aliases.
//!
//! The YAML parser keeps per-level state that it walks for every token, so
//! its time grows with the square of the depth (100,000 nested `[` take
//! minutes). This scan estimates the depth in one pass without parsing:
//! one level per open flow collection (`[`, `{`), per indentation step and
//! per compact entry (`- - x`). Quoted scalars, block scalars (`|`, `>`) and
//! comments are skipped, so brackets inside strings do not count. It may
//! undercount a sequence indented like its parent key by one level per such
//! step, which the limit's margin over the schema's own depth absorbs.
//!
//! Aliases (`*name`) are refused: each one repeats its anchored node after
//! the size limits have counted it once, so a small file could expand to
//! millions of entries. A `*` where a node starts is taken as an alias; a
//! plain value that starts with `*` must be quoted.

/// What the scan stopped at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// The estimated depth passes the limit here.
    TooDeep,
    /// An alias starts here.
    Alias,
}

/// Line and column (1-based) where the estimated depth first exceeds `max`
/// or the first alias starts.
pub(crate) fn first_problem(text: &str, max: usize) -> Option<(usize, usize, Found)> {
    let mut scan = Scan {
        max,
        indents: Vec::new(),
        flow: 0,
        quote: None,
        literal: None,
    };
    for (n, line) in text.lines().enumerate() {
        if let Err((at, found)) = scan.line(line.as_bytes()) {
            let column = line.get(..at).map_or(1, |s| s.chars().count() + 1);
            return Some((n + 1, column, found));
        }
    }
    None
}

/// `Err((byte index, what))`: the scan stops there.
type Step<T> = Result<T, (usize, Found)>;

struct Scan {
    max: usize,
    /// Columns of the open block collections.
    indents: Vec<usize>,
    /// Open flow collections.
    flow: usize,
    /// Inside a quoted scalar that continues on the next line.
    quote: Option<u8>,
    /// Inside a block scalar whose parent line is indented this much.
    literal: Option<usize>,
}

impl Scan {
    fn line(&mut self, b: &[u8]) -> Step<()> {
        let indent = b.iter().take_while(|&&c| c == b' ').count();
        let blank = indent == b.len() || b[indent] == b'#';
        if let Some(parent) = self.literal {
            if blank || indent > parent {
                return Ok(());
            }
            self.literal = None;
        }
        if let Some(q) = self.quote {
            let Some(end) = close_quote(b, 0, q) else {
                return Ok(());
            };
            self.quote = None;
            return self.rest(b, end, false, indent);
        }
        if self.flow > 0 {
            return self.rest(b, 0, false, indent);
        }
        if blank {
            return Ok(());
        }
        if b.starts_with(b"---") || b.starts_with(b"...") {
            self.indents.clear();
            return Ok(());
        }
        let start = self.block_start(b, indent)?;
        self.rest(b, start, true, indent)
    }

    /// Pop the collections this line closes, open its own and one per
    /// compact `- ` / `? ` entry; the index where its content starts.
    fn block_start(&mut self, b: &[u8], indent: usize) -> Step<usize> {
        while self.indents.last().is_some_and(|&c| c >= indent) {
            self.indents.pop();
        }
        self.push(indent)?;
        let mut i = indent;
        while i < b.len() && matches!(b[i], b'-' | b'?') && b.get(i + 1).is_none_or(|&c| c == b' ')
        {
            i += 1;
            while b.get(i) == Some(&b' ') {
                i += 1;
            }
            self.push(i)?;
        }
        Ok(i)
    }

    /// The rest of a line from `i`; `node`: a value may start at `i`.
    fn rest(&mut self, b: &[u8], mut i: usize, mut node: bool, indent: usize) -> Step<()> {
        while i < b.len() {
            if self.flow > 0 {
                i = self.flow_scan(b, i)?;
                node = false;
                continue;
            }
            if b[i] == b' ' {
                i += 1;
                continue;
            }
            if node {
                match b[i] {
                    b'[' | b'{' => {
                        self.open(i)?;
                        i += 1;
                        continue;
                    }
                    q @ (b'"' | b'\'') => match close_quote(b, i + 1, q) {
                        Some(end) => {
                            i = end;
                            node = false;
                            continue;
                        }
                        None => {
                            self.quote = Some(q);
                            return Ok(());
                        }
                    },
                    b'|' | b'>' => {
                        self.literal = Some(indent);
                        return Ok(());
                    }
                    b'#' => return Ok(()),
                    b'*' => return Err((i, Found::Alias)),
                    b'&' | b'!' => {
                        // anchor or tag: the node follows
                        while i < b.len() && b[i] != b' ' {
                            i += 1;
                        }
                        continue;
                    }
                    _ => {}
                }
            }
            match value_after(b, i) {
                Some(next) => {
                    i = next;
                    node = true;
                }
                None => return Ok(()),
            }
        }
        Ok(())
    }

    /// Inside flow collections: the index after the one that closes the
    /// outermost, or the end of the line.
    fn flow_scan(&mut self, b: &[u8], mut i: usize) -> Step<usize> {
        while i < b.len() {
            match b[i] {
                b'[' | b'{' => self.open(i)?,
                b']' | b'}' => {
                    self.flow = self.flow.saturating_sub(1);
                    if self.flow == 0 {
                        return Ok(i + 1);
                    }
                }
                q @ (b'"' | b'\'') if token_start(b, i) => match close_quote(b, i + 1, q) {
                    Some(end) => {
                        i = end;
                        continue;
                    }
                    None => {
                        self.quote = Some(q);
                        return Ok(b.len());
                    }
                },
                b'#' if i == 0 || b[i - 1] == b' ' => return Ok(b.len()),
                b'*' if token_start(b, i) => return Err((i, Found::Alias)),
                _ => {}
            }
            i += 1;
        }
        Ok(b.len())
    }

    fn push(&mut self, column: usize) -> Step<()> {
        self.indents.push(column);
        self.check(column)
    }

    fn open(&mut self, at: usize) -> Step<()> {
        self.flow += 1;
        self.check(at)
    }

    fn check(&self, at: usize) -> Step<()> {
        if self.indents.len() + self.flow > self.max {
            Err((at, Found::TooDeep))
        } else {
            Ok(())
        }
    }
}

/// In a plain scalar from `i`: the index after the next `: ` (where a value
/// starts), or None at a comment or the end of the line.
fn value_after(b: &[u8], mut i: usize) -> Option<usize> {
    while i < b.len() {
        match b[i] {
            b':' if b.get(i + 1).is_none_or(|&c| c == b' ') => return Some(i + 1),
            b'#' if i > 0 && b[i - 1] == b' ' => return None,
            _ => i += 1,
        }
    }
    None
}

/// A quote at `i` opens a scalar only where a flow token may start.
fn token_start(b: &[u8], i: usize) -> bool {
    i == 0 || matches!(b[i - 1], b'[' | b'{' | b',' | b':' | b' ')
}

/// The index after the quote `q` that closes a scalar, scanning from `i`.
fn close_quote(b: &[u8], mut i: usize, q: u8) -> Option<usize> {
    while i < b.len() {
        match b[i] {
            b'\\' if q == b'"' => i += 2,
            b'\'' if q == b'\'' && b.get(i + 1) == Some(&b'\'') => i += 2,
            c if c == q => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}
