//! `Text`: the string type of stored toggles.

/// A string that keeps up to 24 bytes inline, without an allocation of its own: most strings
/// of a toggle (types, projects, strategy and parameter names, context names, short values)
/// are that short (at 10,000 toggles, about 4 MiB less resident memory than `String`).
pub type Text = compact_str::CompactString;
