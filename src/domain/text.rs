//! `Text`: the string type of stored records.

/// A string that keeps up to 24 bytes inline, without an allocation of its own: most strings
/// of a toggle (types, projects, strategy and parameter names, context names, short values)
/// are that short.
pub type Text = compact_str::CompactString;
