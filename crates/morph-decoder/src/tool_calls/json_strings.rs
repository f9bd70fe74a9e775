//! Where a JSON text stands against its strings, read a character at a time: what lies
//! inside a string (a brace, a tag) is text, not structure.

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct JsonStrings {
    in_string: bool,
    escaped: bool,
}

impl JsonStrings {
    /// Reads `c`; whether it stands outside every string (a quote that opens or closes one
    /// counts as inside).
    pub(super) fn outside(&mut self, c: char) -> bool {
        match (self.in_string, self.escaped, c) {
            (true, true, _) => self.escaped = false,
            (true, false, '\\') => self.escaped = true,
            (true, false, '"') => self.in_string = false,
            (false, _, '"') => self.in_string = true,
            (false, ..) => return true,
            (true, ..) => {}
        }
        false
    }
}
