//! A verdict's or fault's first line in text, kept short: what a person
//! reads first, and what a log viewer shows without wrapping.

/// Longest first line of a verdict or fault in text: what a person reads
/// first, and what a log viewer shows without wrapping.
pub const FIRST_LINE_MAX: usize = 200;

/// A verdict's first line and its newline: one longer than
/// [`FIRST_LINE_MAX`] goes on, from its last "; " or ", " that fits (else
/// its last space), on indented lines of its own.
pub(super) fn first_line(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    let mut indent = "";
    while rest.len() + indent.len() > FIRST_LINE_MAX {
        let room = FIRST_LINE_MAX - indent.len();
        let mut cut = room;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let head = &rest[..cut];
        // (Where the line breaks, and how much of the separator it keeps.)
        let Some((at, keep)) = head
            .rfind("; ")
            .or_else(|| head.rfind(", "))
            .filter(|&i| i > room / 3)
            .map(|i| (i, 1))
            .or_else(|| head.rfind(' ').filter(|&i| i > room / 3).map(|i| (i, 0)))
        else {
            break;
        };
        out.push_str(indent);
        out.push_str(&rest[..at + keep]);
        out.push('\n');
        rest = &rest[at + keep + 1..];
        indent = "     ";
    }
    out.push_str(indent);
    out.push_str(rest);
    out.push('\n');
    out
}
