//! HTML: paragraphs, `# headings` (kept as the heading path), list items, Markdown tables and
//! fenced `pre` blocks, read from a stream of tokens (html5gum). No tree is built: tree
//! construction (html5ever's) is quadratic on deeply nested input, the tokenizer is linear.
//!
//! Dropped: scripts, styles, templates, SVG and MathML, embedded frames and objects, form
//! controls, navigation and asides, headers and footers outside `main` and `article`,
//! anything `hidden`, `aria-hidden`, styled `display: none` or of a hiding utility class, and
//! containers whose class or id names page chrome (dropdowns, sidebars, cookie banners…)
//! (`rules`). When the page has a `main` element (or `role="main"`), only its content is
//! kept. Image `alt` text is read where the image stands. A page without an `h1` gets its
//! `<title>` as the top heading.

mod rules;
mod walker;

use memchr::memmem;

use crate::document::{BlockKind, Builder};
use crate::{Document, Limits, ParseError};
use walker::Walker;

pub(crate) fn extract(text: &str, limits: &Limits) -> Result<Document, ParseError> {
    if has_main(text) {
        let mut out = Builder::new(limits);
        let title = Walker::new(true).run(text, &mut out)?;
        // A `main` found only inside a comment or a script gives nothing: read the whole page.
        if !out.blocks().is_empty() {
            return finish(out, &title);
        }
    }
    let mut out = Builder::new(limits);
    let title = Walker::new(false).run(text, &mut out)?;
    finish(out, &title)
}

fn finish(mut out: Builder<'_>, title: &str) -> Result<Document, ParseError> {
    let title = collapse(title);
    let h1 = out
        .blocks()
        .iter()
        .find(|b| b.kind == BlockKind::Heading && b.text.starts_with("# "))
        .map(|b| b.text.trim_start_matches("# ").to_owned());
    match h1 {
        None => out.prepend_heading(&title)?,
        // The page's title says more than its first heading (a site's name, say): kept first.
        Some(h1) if h1 != title => out.prepend_paragraph(&title)?,
        Some(_) => {}
    }
    out.finish()
}

/// The text of an HTML fragment (a Markdown HTML block), blocks on their own lines.
pub(crate) fn fragment_text(html: &str) -> String {
    let limits = Limits {
        max_blocks: usize::MAX,
        max_text_bytes: usize::MAX,
        ..Limits::default()
    };
    let mut out = Builder::new(&limits);
    // Without limits nothing can fail; what was read before an error would be kept anyway.
    let _ = Walker::new(false).run(html, &mut out);
    out.blocks()
        .iter()
        .map(|b| b.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn has_main(text: &str) -> bool {
    let bytes = text.as_bytes();
    let tag = memmem::find_iter(bytes, b"<main")
        .any(|i| matches!(bytes.get(i + 5), Some(b' ' | b'>' | b'\t' | b'\n' | b'/')));
    tag || [&b"role=\"main\""[..], b"role='main'", b"role=main"]
        .iter()
        .any(|p| memmem::find(bytes, p).is_some())
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Appends text with runs of whitespace collapsed to one space, none at the start or after a
/// line break.
fn push_collapsed(dst: &mut String, text: &str) {
    for c in text.chars() {
        if c.is_whitespace() {
            if !dst.is_empty() && !dst.ends_with([' ', '\n']) {
                dst.push(' ');
            }
        } else {
            dst.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(html: &str) -> Vec<(BlockKind, String, Vec<String>)> {
        extract(html, &Limits::default())
            .unwrap()
            .blocks
            .into_iter()
            .map(|b| (b.kind, b.text, b.layout.headings))
            .collect()
    }

    fn texts(html: &str) -> Vec<String> {
        blocks(html).into_iter().map(|(_, t, _)| t).collect()
    }

    #[test]
    fn structure_headings_lists_tables_code() {
        let html = r#"<!DOCTYPE html><html><head><title>Guide - Lamp Works</title><style>p{color:red}</style>
            <script>if (a < b) { document.write("<p>no</p>") }</script></head>
            <body><h1>Guide</h1><p>Hello <b>bold</b>
            world &amp; more.<br>Second line</p>
            <h2>Steps <small>(v2)</small></h2>
            <ol start="3"><li>three<ul><li>nested</li></ul></li><li><p>four</p></ol>
            <table><caption>Prices</caption><tr><th>item</th><th>cost</th></tr>
            <tr><td>tea | milk</td><td><p>2</p><p>EUR</p></td></tr><tr><td></td><td></td></tr></table>
            <pre>
fn main() {
    x &lt; y
}</pre><div>tail</div></body></html>"#;
        let got = blocks(html);
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            got,
            vec![
                (BlockKind::Paragraph, "Guide - Lamp Works".into(), path(&[])),
                (BlockKind::Heading, "# Guide".into(), path(&["Guide"])),
                (
                    BlockKind::Paragraph,
                    "Hello bold world & more.\nSecond line".into(),
                    path(&["Guide"])
                ),
                (
                    BlockKind::Heading,
                    "## Steps (v2)".into(),
                    path(&["Guide", "Steps (v2)"])
                ),
                (
                    BlockKind::ListItem,
                    "3. three".into(),
                    path(&["Guide", "Steps (v2)"])
                ),
                (
                    BlockKind::ListItem,
                    "- nested".into(),
                    path(&["Guide", "Steps (v2)"])
                ),
                (
                    BlockKind::ListItem,
                    "4. four".into(),
                    path(&["Guide", "Steps (v2)"])
                ),
                (
                    BlockKind::Paragraph,
                    "Prices".into(),
                    path(&["Guide", "Steps (v2)"])
                ),
                (
                    BlockKind::Table,
                    "| item | cost |\n| --- | --- |\n| tea \\| milk | 2 EUR |".into(),
                    path(&["Guide", "Steps (v2)"])
                ),
                (
                    BlockKind::Code,
                    "```\nfn main() {\n    x < y\n}\n```".into(),
                    path(&["Guide", "Steps (v2)"])
                ),
                (
                    BlockKind::Paragraph,
                    "tail".into(),
                    path(&["Guide", "Steps (v2)"])
                ),
            ]
        );
    }

    #[test]
    fn chrome_and_hidden_content_are_dropped() {
        let html = r#"<body><header><a>Home</a></header><nav><ul><li>Menu</li></ul></nav>
            <div hidden>secret</div><div style="display: none">gone</div><span aria-hidden="true">x</span>
            <div role="navigation">links</div><div class="vector-dropdown lang">languages</div>
            <p class="sr-only">skip</p><div id="sidebar-content">kept too</div><form><button>Go</button><select><option>A</option></select>
            <p>kept</p></form><svg><text>chart</text></svg><noscript>enable js</noscript>
            <article><header><h1>Post</h1></header><p>body</p><footer>by me</footer></article>
            <aside>related</aside><footer>copyright</footer></body>"#;
        assert_eq!(texts(html), ["kept too", "kept", "# Post", "body", "by me"]);
    }

    #[test]
    fn main_content_only_when_there_is_a_main() {
        let html = "<body><div>site banner</div><h1>Site</h1><main><h2>Article</h2><p>content</p></main><div>after</div></body>";
        assert_eq!(
            blocks(html),
            vec![
                (
                    BlockKind::Heading,
                    "## Article".into(),
                    vec!["Article".to_owned()]
                ),
                (
                    BlockKind::Paragraph,
                    "content".into(),
                    vec!["Article".to_owned()]
                ),
            ]
        );
        // A "main" inside a script only is no main.
        assert_eq!(
            texts("<script>var s = '<main>';</script><p>all</p>"),
            ["all"]
        );
    }

    #[test]
    fn title_is_the_top_heading_without_an_h1() {
        let got = blocks("<title> My   page </title><h2>Part</h2><p>x</p>");
        assert_eq!(
            got[0],
            (
                BlockKind::Heading,
                "# My page".into(),
                vec!["My page".to_owned()]
            )
        );
        assert_eq!(got[2].2, ["My page", "Part"]);
    }

    #[test]
    fn layout_tables_become_paragraphs() {
        assert_eq!(
            texts("<table><tr><td>first</td></tr><tr><td>second</td></tr></table>"),
            ["first", "second"]
        );
    }

    /// MathML is content (EPUB equations), each token a word; a copy hidden beside an image
    /// of the same formula (Wikipedia) is left out as hidden.
    #[test]
    fn mathml_reads_as_words() {
        assert_eq!(
            texts("<p>Divide <math><mn>1306</mn><mo>/</mo><mn>3</mn><mo>=</mo><mn>435.3</mn></math> now.</p>"),
            ["Divide 1306 / 3 = 435.3 now."]
        );
        assert_eq!(
            texts("<p>Area <span style='display: none'><math><mi>π</mi><msup><mi>r</mi><mn>2</mn></msup></math></span><img alt='\\pi r^2'></p>"),
            ["Area \\pi r^2"]
        );
    }

    /// Pandoc's EPUBs: a line number or a test id in a span of its own beside the words (set
    /// apart on screen by a style sheet) is a word of its own; letters split by a tag are not.
    #[test]
    fn digits_and_letters_a_tag_parts_are_two_words() {
        assert_eq!(
            texts("<div>these ascended<span class='lnum'>90</span></div><h2><span>mathml-024</span>Horizontal stretch</h2><p>H<sub>2</sub>O is <b>wat</b>er</p>"),
            ["these ascended 90", "## mathml-024 Horizontal stretch", "H 2 O is water"]
        );
    }

    #[test]
    fn ordered_items_follow_start_and_value() {
        assert_eq!(
            texts("<ol start='7'><li>seven<li value='100'>hundred<li>next</ol>"),
            ["7. seven", "100. hundred", "101. next"]
        );
    }

    /// Text standing in a table outside any cell (inscriptis' test pages): each piece a word
    /// of its own, as a browser shows it before the table.
    #[test]
    fn text_outside_cells_keeps_its_words_apart() {
        assert_eq!(
            texts("<table><tr>1</tr><tr>2</tr><tr>3</tr></table>"),
            ["1 2 3"]
        );
        assert_eq!(
            texts("<table><td><td>alpha</td>oho</td><td>epsilon<tr>beta<td>gamma</table>")[0],
            "oho beta"
        );
    }

    #[test]
    fn nothing_visible_has_no_text() {
        assert_eq!(
            extract("<script>x()</script><style>a{}</style>", &Limits::default()),
            Err(ParseError::NoText)
        );
    }

    #[test]
    fn unclosed_elements_end_with_the_input() {
        assert_eq!(texts("<h2>Title<p>never closed"), ["## Title never closed"]);
        assert_eq!(
            texts("<table><tr><td>a<td>b<tr><td>1<td>2"),
            ["| a | b |\n| --- | --- |\n| 1 | 2 |"]
        );
        assert_eq!(texts("<pre>code"), ["```\ncode\n```"]);
    }

    #[test]
    fn hostile_html_is_linear() {
        crate::tests::assert_linear(40_000, |n| {
            let mut attrs = String::from("<a ");
            for i in 0..n {
                attrs.push_str(&format!("a{i} "));
            }
            attrs.push_str(">x");
            let _ = extract(&attrs, &Limits::default());
            for unit in [
                "<div>",
                "<ul><li>",
                "<table><tr><td>",
                "<b>",
                "<main>",
                "<nav>",
                "<h1>",
                "&amp;",
                "<!--",
            ] {
                let _ = extract(&unit.repeat(n), &Limits::default());
            }
        });
    }

    #[test]
    fn markitdown_pages() {
        let cases: [(&str, &[&str], &[&str]); 3] = [
            (
                "test_blog.html",
                &[
                    "Large language models (LLMs) are powerful tools that can generate natural language texts for various applications, such as chatbots, summarization, translation, and more. GPT-4 is currently the state of the art LLM in the world. Is model selection irrelevant? What about inference parameters?",
                    "an example where high cost can easily prevent a generic complex",
                ],
                &[],
            ),
            (
                "test_wikipedia.html",
                &[
                    "Microsoft entered the operating system (OS) business in 1980 with its own version of Unix",
                    "Microsoft was founded by Bill Gates",
                ],
                &["You are encouraged to create an account and log in", "154 languages", "move to sidebar"],
            ),
            (
                "test_serp.html",
                &[
                    "Microsoft Corporation is an American multinational corporation and technology company headquartered in Redmond",
                    "1995–2007: Foray into the Web, Windows 95, Windows XP, and Xbox",
                ],
                &["https://www.bing.com/ck/a?!&&p=", "data:image/svg+xml,%3Csvg%20width%3D"],
            ),
        ];
        for (file, must, must_not) in cases {
            let html = std::fs::read_to_string(crate::tests::sample(file)).unwrap();
            let text = extract(&html, &Limits::default()).unwrap().text();
            for m in must {
                assert!(text.contains(m), "{file}: missing {m:?}");
            }
            for m in must_not {
                assert!(!text.contains(m), "{file}: has {m:?}");
            }
        }
    }
}
