//! An upper bound on how deep the flow collections (`[ ]`, `{ }`) of a YAML text nest, taken
//! before the YAML scanner runs: its time grows with the square of that depth.
//!
//! Telling a bracket that opens a collection from one inside a quoted scalar, a comment or a
//! block scalar takes a YAML scanner, and a guess can be led astray: a quote the guess takes
//! for the start of a scalar (`[a:'b, [[[…`) hides every bracket after it. So the bound never
//! guesses. Every `[` and `{` counts as open, and a `]` or `}` takes one off only when it
//! provably closes something: each open bracket carries a scan of what follows it *as if* it
//! had opened a flow collection, following libyaml's scanner (which `yaml_serde` uses) on what
//! flow context decides — where quoted scalars, comments, plain scalars, anchors and tags
//! begin and end — and a closing bracket takes off an open bracket whose scan sees it outside
//! any of those. The scan of a bracket that did open a collection is exact while it
//! is open, so it is never taken off by a bracket inside text; one that opened nothing may be,
//! which only takes away what it wrongly added (which open bracket a closing one takes off
//! does not matter, so brackets whose scans are in the same state are counted together). The
//! bound is therefore never below the depth the scanner meets; it is above it by the brackets
//! in text that are not balanced within it.

/// Whether the flow collections of `bytes` may nest deeper than `max`.
pub(super) fn flow_depth_exceeds(bytes: &[u8], max: usize) -> bool {
    // The open brackets, grouped by the state of their scans: scans in one state read the
    // rest alike, so a group is stepped once however many brackets it holds (a document
    // cannot make this cost more than a few steps a byte).
    let mut open: Vec<(Scan, usize)> = Vec::new();
    let mut depth = 0usize;
    for i in 0..bytes.len() {
        let b = bytes[i];
        if matches!(b, b']' | b'}') {
            if let Some(group) = open.iter_mut().find(|(scan, _)| scan.sees_closer(bytes, i)) {
                group.1 -= 1;
                depth -= 1;
            }
        }
        for (scan, _) in &mut open {
            scan.step(bytes, i);
        }
        if matches!(b, b'[' | b'{') {
            open.push((Scan::default(), 1));
            depth += 1;
            if depth > max {
                return true;
            }
        }
        if open.len() > 1 {
            regroup(&mut open);
        } else {
            open.retain(|(_, n)| *n > 0);
        }
    }
    false
}

/// Merges groups whose scans are in the same state and drops empty ones (their order does
/// not matter).
fn regroup(open: &mut Vec<(Scan, usize)>) {
    let mut i = 0;
    while i < open.len() {
        if open[i].1 == 0 {
            open.swap_remove(i);
        } else if let Some(j) = (0..i).find(|&j| open[j].0 == open[i].0) {
            open[j].1 += open[i].1;
            open.swap_remove(i);
        } else {
            i += 1;
        }
    }
}

/// Where a flow-context scan is, as libyaml's scanner tokenises flow context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum State {
    /// Between tokens (whitespace, line breaks and comments are skipped here).
    #[default]
    Between,
    /// In a plain scalar.
    Plain,
    /// In a plain scalar, after blanks or line breaks: a `#` here starts a comment.
    PlainBlank,
    /// In a single-quoted scalar.
    Single,
    /// In a double-quoted scalar.
    Double,
    /// In a comment, up to the line break.
    Comment,
    /// In an anchor or alias name.
    Anchor,
    /// In a shorthand tag (`!name`, `!!str`).
    Tag,
    /// In a verbatim tag (`!<…>`), up to `>`.
    Verbatim,
}

/// The scan that follows one open bracket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Scan {
    state: State,
    /// Bytes still to skip: the rest of a multi-byte line break or BOM, an escaped character.
    skip: u8,
}

/// The length of the line break at `i` (libyaml's: CR, LF, NEL, LS, PS), or 0.
fn line_break(bytes: &[u8], i: usize) -> usize {
    match &bytes[i..] {
        [b'\r' | b'\n', ..] => 1,
        [0xc2, 0x85, ..] => 2,
        [0xe2, 0x80, 0xa8 | 0xa9, ..] => 3,
        _ => 0,
    }
}

/// Whether the byte at `i` is a blank, a line break, NUL or the end.
fn blank_or_end(bytes: &[u8], i: usize) -> bool {
    i >= bytes.len() || matches!(bytes[i], b' ' | b'\t' | 0) || line_break(bytes, i) > 0
}

/// Whether `i` is at the start of a line.
fn line_start(bytes: &[u8], i: usize) -> bool {
    i == 0
        || matches!(bytes[i - 1], b'\r' | b'\n')
        || bytes[..i].ends_with(&[0xc2, 0x85])
        || bytes[..i].ends_with(&[0xe2, 0x80, 0xa8])
        || bytes[..i].ends_with(&[0xe2, 0x80, 0xa9])
}

/// The characters of a shorthand tag (libyaml's URI characters without `,`, `[` and `]`).
fn tag_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_;/?:@&=+$.%!~*'()".contains(&b)
}

impl Scan {
    /// Whether the `]` or `}` at `i` closes a collection, as this scan reads it.
    fn sees_closer(&self, bytes: &[u8], i: usize) -> bool {
        self.skip == 0
            && matches!(
                self.state,
                State::Between | State::Plain | State::PlainBlank | State::Anchor
            )
            && matches!(bytes[i], b']' | b'}')
    }

    /// Reads the byte at `i`.
    fn step(&mut self, bytes: &[u8], i: usize) {
        if self.skip > 0 {
            self.skip -= 1;
            return;
        }
        let b = bytes[i];
        let breaks = line_break(bytes, i);
        match self.state {
            State::Between => self.between(bytes, i),
            State::Plain => self.plain(bytes, i),
            State::PlainBlank => match b {
                b' ' | b'\t' => {}
                _ if breaks > 0 => self.skip = (breaks - 1) as u8,
                b'#' => self.state = State::Comment,
                _ => self.plain(bytes, i),
            },
            State::Single => {
                if b == b'\'' {
                    if bytes.get(i + 1) == Some(&b'\'') {
                        self.skip = 1;
                    } else {
                        self.state = State::Between;
                    }
                }
            }
            State::Double => match b {
                b'\\' => self.skip = 1,
                b'"' => self.state = State::Between,
                _ => {}
            },
            State::Comment => {
                if breaks > 0 {
                    self.state = State::Between;
                    self.skip = (breaks - 1) as u8;
                }
            }
            State::Anchor => {
                if !(b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
                    self.between(bytes, i);
                }
            }
            State::Tag => {
                if !tag_char(b) {
                    self.between(bytes, i);
                }
            }
            State::Verbatim => {
                if b == b'>' {
                    self.state = State::Between;
                } else if !(tag_char(b) || matches!(b, b',' | b'[' | b']')) {
                    self.between(bytes, i);
                }
            }
        }
    }

    /// Reads the byte at `i` at the start of a token.
    fn between(&mut self, bytes: &[u8], i: usize) {
        let b = bytes[i];
        let breaks = line_break(bytes, i);
        self.state = match b {
            b' ' | b'\t' => State::Between,
            _ if breaks > 0 => {
                self.skip = (breaks - 1) as u8;
                State::Between
            }
            // A byte order mark at the start of a line is skipped.
            0xef if line_start(bytes, i) && bytes[i..].starts_with(&[0xef, 0xbb, 0xbf]) => {
                self.skip = 2;
                State::Between
            }
            b'#' => State::Comment,
            b'[' | b'{' | b']' | b'}' | b',' | b'?' | b':' => State::Between,
            b'-' if blank_or_end(bytes, i + 1) => State::Between,
            b'\'' => State::Single,
            b'"' => State::Double,
            b'&' | b'*' => State::Anchor,
            b'!' if bytes.get(i + 1) == Some(&b'<') => {
                self.skip = 1;
                State::Verbatim
            }
            b'!' => State::Tag,
            // Anything else starts a plain scalar (or is an error that stops the scanner).
            _ => State::Plain,
        };
    }

    /// Reads the byte at `i` inside a plain scalar.
    fn plain(&mut self, bytes: &[u8], i: usize) {
        let b = bytes[i];
        let breaks = line_break(bytes, i);
        match b {
            b' ' | b'\t' | 0 => self.state = State::PlainBlank,
            _ if breaks > 0 => {
                self.state = State::PlainBlank;
                self.skip = (breaks - 1) as u8;
            }
            // `: ` ends the scalar and is a value indicator; `:` before anything else is part
            // of it (or, before a flow indicator, an error).
            b':' if blank_or_end(bytes, i + 1) => self.state = State::Between,
            b',' | b'[' | b']' | b'{' | b'}' => self.state = State::Between,
            _ => self.state = State::Plain,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collections_are_counted_and_balanced_text_is_not() {
        assert!(!flow_depth_exceeds(b"a: [[1]]\nb: [[2], [3]]\n", 2));
        assert!(flow_depth_exceeds(b"a: [[[1]]]", 2));
        // Brackets balanced inside quoted scalars and comments cost their own depth only.
        assert!(!flow_depth_exceeds(
            b"a: \"[[]]\"\nb: '{{}}'\nc: [\"]]\", '}}'] # [[]]\n",
            2
        ));
        // A bracket in a quoted scalar closes nothing: ["]", ["]", … is nesting.
        assert!(flow_depth_exceeds(b"[\"]\", [\"]\", [\"]\", [1]]]]", 3));
        assert!(flow_depth_exceeds(b"[#]\n[#]\n[#]\n[1]]]]", 3));
        // Brackets in text that are not balanced count: the bound is never too low.
        assert!(flow_depth_exceeds(b"a: \"[[[[\"\n", 3));
    }

    /// Found by fuzzing: a quote the old guess took for the start of a scalar (after `:`
    /// inside a plain scalar, or at the start of a line of a block scalar) hid all nesting
    /// after it, and the YAML scanner spent seconds on a few kilobytes.
    #[test]
    fn a_quote_that_starts_nothing_hides_nothing() {
        let nest = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        for doc in [
            format!("[a:'b, {nest}]\n"),
            format!("a: |\n  'unclosed\nb: {nest}\n"),
            format!("a: b\n  'x\nc: {nest}\n"),
            format!("[a 'b, {nest}]\n"),
            format!("[!t'x {nest}]\n"),
        ] {
            assert!(flow_depth_exceeds(doc.as_bytes(), 64), "{doc}");
        }
    }
}
