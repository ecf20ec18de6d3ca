//! Tables of a PDF page from Poppler's layout reading (`pdftotext -layout`), which keeps each
//! line's words at their horizontal place. Its reading order (what `pdf` reads otherwise) gives
//! a table as a stream of labels, then of numbers, column by column; here a table is a run of
//! lines whose words stand in three or more columns: a column break is a band at least two
//! characters wide that is blank on every line of the run (a river), and each line's cells are
//! its text between the breaks.
//!
//! A page's layout reading is used only where it holds a table and no prose in columns (a
//! two-column article's lines run across both columns in it, which the reading order does not).

/// Fewest lines holding two or more cells for a run to be a table.
const MIN_ROWS: usize = 3;
/// Fewest columns of a table (two columns of words are as often a form or prose columns).
const MIN_COLUMNS: usize = 3;
/// Widest blank band inside a cell: two spaces or more separate cells.
const CELL_GAP: usize = 2;
/// A line of a single cell longer than this (characters) is prose and ends a run.
const SHORT_LINE: usize = 40;
/// Cells longer than this on average are prose in columns, not a table.
const PROSE_CELL: usize = 30;
/// Lines with cells this long on average, this many in a row, are prose in columns.
const PROSE_COLUMN_LINES: usize = 4;

/// One part of a page, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Segment {
    /// Lines of text, spaces between words collapsed, paragraphs apart by blank lines.
    Text(String),
    /// Rows of cells, the first row being the header; rows have as many cells as columns.
    Table(Vec<Vec<String>>),
}

/// Whether a page of the reading order looks like a table read as a stream: at least five short
/// lines of numbers alone (`2,100`, `10.20%`, `-`, `0.712 0.645`).
pub(crate) fn looks_tabular(page: &str) -> bool {
    page.lines()
        .filter(|line| {
            let line = line.trim();
            !line.is_empty()
                && line.chars().count() <= SHORT_LINE
                && line.split_whitespace().all(is_figure)
        })
        .count()
        >= 5
}

/// A number, a share, an amount or a dash standing for none.
fn is_figure(word: &str) -> bool {
    let digits = word.chars().filter(char::is_ascii_digit).count();
    let other = word
        .chars()
        .filter(|c| {
            !c.is_ascii_digit()
                && !matches!(
                    c,
                    '.' | ',' | '%' | '-' | '+' | '$' | '€' | '£' | '(' | ')' | '±' | '−' | '–'
                )
        })
        .count();
    other == 0 && (digits > 0 || matches!(word, "-" | "–" | "—"))
}

/// The page's segments, when its layout reading holds a table and no prose in columns; `None`
/// otherwise (the caller keeps the reading order).
pub(crate) fn segments(page: &str) -> Option<Vec<Segment>> {
    let lines: Vec<Vec<char>> = page
        .lines()
        .map(|l| l.trim_end().chars().collect())
        .collect();
    if prose_in_columns(&lines) {
        return None;
    }
    let mut segments = Vec::new();
    let mut text = String::new();
    let mut at = 0;
    let mut found = false;
    while at < lines.len() {
        if let Some((end, rows)) = table_at(&lines, at) {
            if !text.trim().is_empty() {
                segments.push(Segment::Text(std::mem::take(&mut text)));
            }
            text.clear();
            segments.push(Segment::Table(rows));
            found = true;
            at = end;
            continue;
        }
        let line: String = lines[at].iter().collect();
        text.push_str(&line.split_whitespace().collect::<Vec<_>>().join(" "));
        text.push('\n');
        at += 1;
    }
    if !text.trim().is_empty() {
        segments.push(Segment::Text(text));
    }
    found.then_some(segments)
}

/// Cells of a line: runs of text apart by at least [`CELL_GAP`] spaces, with where each starts.
fn cells(line: &[char]) -> Vec<(usize, usize)> {
    let mut cells = Vec::new();
    let mut start = None;
    let mut blanks = 0;
    for (x, c) in line.iter().enumerate() {
        if c.is_whitespace() {
            blanks += 1;
            if blanks >= CELL_GAP {
                if let Some(s) = start.take() {
                    cells.push((s, x + 1 - blanks));
                }
            }
        } else {
            if start.is_none() {
                start = Some(x);
            }
            blanks = 0;
        }
    }
    if let Some(s) = start {
        cells.push((s, line.len() - blanks));
    }
    cells
}

/// Runs of at least [`PROSE_COLUMN_LINES`] lines of two or more cells whose cells average over
/// [`PROSE_CELL`] characters: text set in columns.
fn prose_in_columns(lines: &[Vec<char>]) -> bool {
    let mut run = 0;
    for line in lines {
        let cells = cells(line);
        let long = cells.len() >= 2
            && cells.iter().map(|(s, e)| e - s).sum::<usize>() / cells.len() > PROSE_CELL;
        run = if long { run + 1 } else { 0 };
        if run >= PROSE_COLUMN_LINES {
            return true;
        }
    }
    false
}

/// The table starting at line `at`, if one does: where it ends and its rows.
fn table_at(lines: &[Vec<char>], at: usize) -> Option<(usize, Vec<Vec<String>>)> {
    let multi = |line: &[char]| cells(line).len() >= 2;
    if !multi(&lines[at]) {
        return None;
    }
    // The run: lines of several cells, and short single-cell lines between them.
    let mut end = at;
    let mut last_multi = at;
    while end < lines.len() {
        let line = &lines[end];
        let count = cells(line).len();
        if count == 0
            || (count == 1 && line.iter().filter(|c| !c.is_whitespace()).count() > SHORT_LINE)
        {
            break;
        }
        if count >= 2 {
            last_multi = end;
        }
        end += 1;
    }
    let run = &lines[at..=last_multi];
    if run.iter().filter(|l| multi(l)).count() < MIN_ROWS {
        return None;
    }
    let breaks = rivers(run);
    if breaks.len() + 1 < MIN_COLUMNS {
        return None;
    }
    let rows: Vec<Vec<String>> = run
        .iter()
        .map(|line| split_at_breaks(line, &breaks))
        .filter(|row| row.iter().any(|c| !c.is_empty()))
        .collect();
    let filled: Vec<&String> = rows.iter().flatten().filter(|c| !c.is_empty()).collect();
    let average = filled.iter().map(|c| c.chars().count()).sum::<usize>() / filled.len().max(1);
    if average > PROSE_CELL
        || rows
            .iter()
            .filter(|r| r.iter().filter(|c| !c.is_empty()).count() >= 2)
            .count()
            < MIN_ROWS
    {
        return None;
    }
    Some((last_multi + 1, rows))
}

/// Column breaks of a run of lines: bands of at least [`CELL_GAP`] characters blank on every
/// line, between the first text and the last; each as (start, end) of the band.
fn rivers(run: &[Vec<char>]) -> Vec<(usize, usize)> {
    let width = run.iter().map(Vec::len).max().unwrap_or(0);
    let blank: Vec<bool> = (0..width)
        .map(|x| {
            run.iter()
                .all(|l| l.get(x).is_none_or(|c| c.is_whitespace()))
        })
        .collect();
    let first = blank.iter().position(|b| !b).unwrap_or(width);
    let mut breaks = Vec::new();
    let mut x = first;
    while x < width {
        if blank[x] {
            let start = x;
            while x < width && blank[x] {
                x += 1;
            }
            if x < width && x - start >= CELL_GAP {
                breaks.push((start, x));
            }
        } else {
            x += 1;
        }
    }
    breaks
}

/// A line's cells between the breaks, trimmed, inner spaces collapsed.
fn split_at_breaks(line: &[char], breaks: &[(usize, usize)]) -> Vec<String> {
    let mut cells = Vec::with_capacity(breaks.len() + 1);
    let mut from = 0;
    for &(start, end) in breaks
        .iter()
        .chain(std::iter::once(&(usize::MAX, usize::MAX)))
    {
        let to = start.min(line.len());
        let text: String = line
            .get(from.min(line.len())..to)
            .unwrap_or_default()
            .iter()
            .collect();
        cells.push(text.split_whitespace().collect::<Vec<_>>().join(" "));
        from = end;
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    const ESTIMATE: &str = "\
                           ZAVA AUTO REPAIR
Repair Order #          RO-20221108

                                                  Estimate Totals
                                                      Hours       Rate                  Cost
Parts                                                                                   2,100
Body Labor                                            2               150               300
Paint Labor                                           1.5             150               225
Supplies
                        Paint Supplies                                                  60
Sales Tax                                                             10.20%            278.46
GRAND TOTAL                                                                             5,738

This is a preliminary estimate for the visible damage of the vehicle. Additional damage may be found.
";

    fn cells_of(rows: &[&[&str]]) -> Vec<Vec<String>> {
        rows.iter()
            .map(|r| r.iter().map(|c| (*c).to_owned()).collect())
            .collect()
    }

    #[test]
    fn aligned_columns_become_a_table_between_the_text() {
        let segments = segments(ESTIMATE).expect("a table");
        assert_eq!(segments.len(), 3, "{segments:#?}");
        assert_eq!(
            segments[0],
            Segment::Text(
                "ZAVA AUTO REPAIR\nRepair Order # RO-20221108\n\nEstimate Totals\n".into()
            )
        );
        assert_eq!(
            segments[1],
            Segment::Table(cells_of(&[
                &["", "", "Hours", "Rate", "Cost"],
                &["Parts", "", "", "", "2,100"],
                &["Body Labor", "", "2", "150", "300"],
                &["Paint Labor", "", "1.5", "150", "225"],
                &["Supplies", "", "", "", ""],
                &["", "Paint Supplies", "", "", "60"],
                &["Sales Tax", "", "", "10.20%", "278.46"],
                &["GRAND TOTAL", "", "", "", "5,738"],
            ]))
        );
        let Segment::Text(tail) = &segments[2] else {
            panic!("{segments:#?}")
        };
        assert!(tail.contains("This is a preliminary estimate"), "{tail}");
    }

    #[test]
    fn the_reading_order_of_a_table_looks_tabular_and_prose_does_not() {
        assert!(looks_tabular(
            "Hours\nRate\nParts\n2\n1.5\n-\n150\n150\n-\n10.20%\n2,100"
        ));
        assert!(looks_tabular(
            "0.712 0.645\n0.70 0.69\n12 14\n(3) 4%\n+1.5 -2"
        ));
        assert!(!looks_tabular(
            "A paragraph of prose.\nIt goes on for 2 lines.\n\nIn 2024 it had 3 parts."
        ));
    }

    #[test]
    fn prose_in_columns_and_two_column_forms_are_no_table() {
        let columns = "\
The first column of an article runs here         and the second column runs beside it in
its own words, a line of each at a time so       the layout reading puts both on one line
that reading across mixes the two of them        which the reading order keeps apart as it
should, line after line down the whole page      goes down its own column to the end.
";
        assert_eq!(segments(columns), None);
        let form = "\
Insured name     Gabriel Diaz
Claim #          SF-1008
Policy #         POL-2022-555
";
        assert_eq!(segments(form), None, "two columns are a form, not a table");
        assert_eq!(segments("Plain text.\n\nMore plain text.\n"), None);
    }

    #[test]
    fn a_line_across_the_columns_ends_the_table() {
        let page = "\
Model         P      R      F1
BM25          0.61   0.70   0.65
Dense         0.66   0.74   0.70
Hybrid        0.71   0.78   0.74
The hybrid model leads on every measure in this table, and by the most on precision at ten.
";
        let segments = segments(page).expect("a table");
        assert_eq!(
            segments[0],
            Segment::Table(cells_of(&[
                &["Model", "P", "R", "F1"],
                &["BM25", "0.61", "0.70", "0.65"],
                &["Dense", "0.66", "0.74", "0.70"],
                &["Hybrid", "0.71", "0.78", "0.74"],
            ]))
        );
        assert!(matches!(&segments[1], Segment::Text(t) if t.starts_with("The hybrid model")));
    }
}
