//! DrawingML charts (`c:chartSpace` parts of Word, PowerPoint and Excel files) as a small
//! table: the chart's title, then a Markdown table of its categories and each series' values,
//! read from the values cached in the chart (what the chart shows), never from the linked sheet.

use std::collections::BTreeMap;

use quick_xml::events::Event;
use quick_xml::Reader;

use crate::formats::ooxml::{attr, local, text_of};
use crate::formats::table;

/// Points read per series at most (a chart plotting more is cut there).
const POINTS_MAX: usize = 1_000;
/// Series read per chart at most.
const SERIES_MAX: usize = 50;

#[derive(Debug, Default)]
struct Series {
    name: String,
    categories: BTreeMap<u32, String>,
    values: BTreeMap<u32, String>,
    /// A bubble chart's bubble sizes.
    sizes: BTreeMap<u32, String>,
    /// Data labels given their own text (`c:dLbl` with rich text), by point.
    labels: BTreeMap<u32, String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Name,
    Categories,
    Values,
    Sizes,
}

/// A chart as text: `Chart: <title>` (and axis titles), then its table; `None` when the part
/// holds no title and no values.
pub(crate) fn chart_text(xml: &str) -> Option<String> {
    let mut reader = Reader::from_str(xml);
    let mut series: Vec<Series> = Vec::new();
    let mut titles: Vec<String> = Vec::new();
    // Open `c:title` elements and the text read inside the outermost.
    let (mut in_title, mut title) = (0usize, String::new());
    let (mut in_series, mut part, mut point, mut in_value) = (false, None, 0u32, false);
    let mut in_formula = false;
    // Inside a series' `c:dLbl` (its point), and inside its rich text's `a:t`.
    let (mut label, mut in_label_text) = (None::<u32>, false);
    loop {
        match reader.read_event() {
            Ok(Event::Empty(e)) if label.is_some() && local(e.name().as_ref()) == b"idx" => {
                label = attr(&e, b"val").and_then(|i| i.parse().ok());
            }
            Ok(Event::Start(e)) => match local(e.name().as_ref()) {
                b"dLbl" if in_series => label = Some(0),
                b"t" if label.is_some() => in_label_text = true,
                b"title" => in_title += 1,
                b"ser" => {
                    in_series = series.len() < SERIES_MAX;
                    if in_series {
                        series.push(Series::default());
                    }
                }
                b"tx" if in_series && in_title == 0 => part = Some(Part::Name),
                b"cat" | b"xVal" if in_series => part = Some(Part::Categories),
                b"val" | b"yVal" if in_series => part = Some(Part::Values),
                b"bubbleSize" if in_series => part = Some(Part::Sizes),
                b"pt" => {
                    point = attr(&e, b"idx").and_then(|i| i.parse().ok()).unwrap_or(0);
                }
                b"v" => in_value = true,
                b"f" => in_formula = true,
                _ => {}
            },
            Ok(Event::Text(t)) if in_formula => drop(t),
            Ok(Event::Text(t)) if in_label_text => {
                if let (Some(s), Some(point)) = (series.last_mut(), label) {
                    if s.labels.len() < POINTS_MAX {
                        s.labels.entry(point).or_default().push_str(&text_of(&t));
                    }
                }
            }
            Ok(Event::Text(t)) if in_title > 0 => title.push_str(&text_of(&t)),
            Ok(Event::Text(t)) if in_value && in_series => {
                let text = text_of(&t).trim().to_owned();
                if let (Some(s), Some(part)) = (series.last_mut(), part) {
                    match part {
                        Part::Name => s.name = text,
                        // Multi-level categories (`c:lvl`) name a point once per level:
                        // `London / GB`.
                        Part::Categories if s.categories.len() < POINTS_MAX => {
                            s.categories
                                .entry(point)
                                .and_modify(|c| {
                                    c.push_str(" / ");
                                    c.push_str(&text);
                                })
                                .or_insert(text);
                        }
                        Part::Values if s.values.len() < POINTS_MAX => {
                            s.values.insert(point, text);
                        }
                        Part::Sizes if s.sizes.len() < POINTS_MAX => {
                            s.sizes.insert(point, text);
                        }
                        Part::Categories | Part::Values | Part::Sizes => {}
                    }
                }
            }
            Ok(Event::End(e)) => match local(e.name().as_ref()) {
                b"title" => {
                    in_title = in_title.saturating_sub(1);
                    if in_title == 0 {
                        let text = title.split_whitespace().collect::<Vec<_>>().join(" ");
                        if !text.is_empty() {
                            titles.push(text);
                        }
                        title.clear();
                    }
                }
                b"ser" => in_series = false,
                b"dLbl" => label = None,
                b"t" => in_label_text = false,
                b"tx" | b"cat" | b"xVal" | b"val" | b"yVal" | b"bubbleSize" => part = None,
                b"v" => in_value = false,
                b"f" => in_formula = false,
                _ => {}
            },
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => {}
        }
    }
    series.retain(|s| !s.values.is_empty() || !s.name.is_empty());
    if titles.is_empty() && series.is_empty() {
        return None;
    }
    let mut text = match titles.split_first() {
        Some((first, [])) => format!("Chart: {first}"),
        Some((first, axes)) => format!("Chart: {first} (axes: {})", axes.join(", ")),
        None => "Chart".to_owned(),
    };
    if series.is_empty() {
        return Some(text);
    }
    // Categories come from the first series that has them; points are matched by index.
    let categories = series
        .iter()
        .find(|s| !s.categories.is_empty())
        .map(|s| s.categories.clone())
        .unwrap_or_default();
    let mut points: Vec<u32> = categories.keys().copied().collect();
    for s in &series {
        points.extend(s.values.keys().chain(s.labels.keys()).copied());
    }
    points.sort_unstable();
    points.dedup();
    let mut header = vec!["Category".to_owned()];
    for (i, s) in series.iter().enumerate() {
        let name = if s.name.is_empty() {
            format!("Series {}", i + 1)
        } else {
            s.name.clone()
        };
        header.push(name.clone());
        if !s.sizes.is_empty() {
            header.push(format!("{name} (size)"));
        }
        if !s.labels.is_empty() {
            header.push(format!("{name} (label)"));
        }
    }
    let mut rows = vec![header];
    for p in points.into_iter().take(POINTS_MAX) {
        let mut row = vec![categories
            .get(&p)
            .cloned()
            .unwrap_or_else(|| (p + 1).to_string())];
        for s in &series {
            row.push(s.values.get(&p).cloned().unwrap_or_default());
            for extra in [&s.sizes, &s.labels] {
                if !extra.is_empty() {
                    row.push(extra.get(&p).cloned().unwrap_or_default());
                }
            }
        }
        rows.push(row);
    }
    text.push_str("\n\n");
    text.push_str(&table::markdown(&rows));
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_reads_as_its_title_and_a_table_of_its_series() {
        let xml = r#"<c:chartSpace xmlns:c="c" xmlns:a="a"><c:chart>
          <c:title><c:tx><c:rich><a:p><a:r><a:t>Revenue by </a:t></a:r><a:r><a:t>region</a:t></a:r></a:p></c:rich></c:tx></c:title>
          <c:plotArea><c:barChart>
            <c:ser><c:tx><c:strRef><c:f>Sheet1!$B$1</c:f><c:strCache><c:pt idx="0"><c:v>2023</c:v></c:pt></c:strCache></c:strRef></c:tx>
              <c:cat><c:strRef><c:f>Sheet1!$A$2:$A$3</c:f><c:strCache><c:pt idx="0"><c:v>North</c:v></c:pt><c:pt idx="1"><c:v>South</c:v></c:pt></c:strCache></c:strRef></c:cat>
              <c:val><c:numRef><c:f>Sheet1!$B$2:$B$3</c:f><c:numCache><c:formatCode>General</c:formatCode><c:pt idx="0"><c:v>1200</c:v></c:pt><c:pt idx="1"><c:v>800</c:v></c:pt></c:numCache></c:numRef></c:val></c:ser>
            <c:ser><c:tx><c:v>2024</c:v></c:tx>
              <c:val><c:numRef><c:numCache><c:pt idx="0"><c:v>1500</c:v></c:pt><c:pt idx="1"><c:v>900</c:v></c:pt></c:numCache></c:numRef></c:val></c:ser>
          </c:barChart><c:valAx><c:title><c:tx><c:rich><a:p><a:r><a:t>EUR</a:t></a:r></a:p></c:rich></c:tx></c:title></c:valAx></c:plotArea></c:chart></c:chartSpace>"#;
        assert_eq!(
            chart_text(xml).unwrap(),
            "Chart: Revenue by region (axes: EUR)\n\n| Category | 2023 | 2024 |\n| --- | --- | --- |\n| North | 1200 | 1500 |\n| South | 800 | 900 |"
        );
        assert_eq!(chart_text("<c:chartSpace/>"), None);
    }

    #[test]
    fn a_bubble_chart_reads_its_sizes_and_labels_beside_its_values() {
        let xml = r#"<c:chartSpace xmlns:c="c" xmlns:a="a"><c:chart><c:plotArea><c:bubbleChart><c:ser>
          <c:tx><c:v>Stores</c:v></c:tx>
          <c:dLbls><c:dLbl><c:idx val="1"/><c:tx><c:rich><a:p><a:r><a:t>fast</a:t></a:r><a:r><a:t>est</a:t></a:r></a:p></c:rich></c:tx></c:dLbl></c:dLbls>
          <c:xVal><c:numRef><c:numCache><c:pt idx="0"><c:v>1</c:v></c:pt><c:pt idx="1"><c:v>2</c:v></c:pt></c:numCache></c:numRef></c:xVal>
          <c:yVal><c:numRef><c:numCache><c:pt idx="0"><c:v>-3.8</c:v></c:pt><c:pt idx="1"><c:v>0.8</c:v></c:pt></c:numCache></c:numRef></c:yVal>
          <c:bubbleSize><c:numRef><c:numCache><c:pt idx="0"><c:v>10</c:v></c:pt><c:pt idx="1"><c:v>4</c:v></c:pt></c:numCache></c:numRef></c:bubbleSize>
        </c:ser></c:bubbleChart></c:plotArea></c:chart></c:chartSpace>"#;
        assert_eq!(
            chart_text(xml).unwrap(),
            "Chart\n\n| Category | Stores | Stores (size) | Stores (label) |\n| --- | --- | --- | --- |\n| 1 | -3.8 | 10 |  |\n| 2 | 0.8 | 4 | fastest |"
        );
    }
}
