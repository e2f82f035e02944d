//! Aligned text tables, the one layout of every report a subcommand prints
//! as columns (`status`, `history`, `doctor`, `config`).

/// Columns between cells.
const GAP: &str = "  ";

/// `header` and `rows` as lines of aligned columns, each ending in `\n`:
/// every cell but the last padded to the widest cell of its column, two
/// spaces between columns; the last cell as it is (never padded). Widths
/// count bytes while padding counts characters, so a column holding a
/// non-ASCII cell is wider than it needs to be, never misaligned.
pub fn render<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> String {
    let mut widths = header.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    let mut line = |cells: [&str; N]| {
        for (i, (cell, w)) in cells.into_iter().zip(widths).enumerate() {
            if i + 1 == N {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:w$}{GAP}"));
            }
        }
        out.push('\n');
    };
    line(header);
    for row in rows {
        line(row.each_ref().map(String::as_str));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_every_column_but_the_last() {
        let rows = [
            ["a:1".to_owned(), "held".into(), "x".into()],
            ["bb:22".into(), "-".into(), "".into()],
        ];
        assert_eq!(
            render(["SERVER", "STATE", "HOLDER"], &rows),
            "SERVER  STATE  HOLDER\na:1     held   x\nbb:22   -      \n"
        );
    }
}
