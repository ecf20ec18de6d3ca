//! Which elements end paragraphs, which are dropped, and what names page chrome.

use std::collections::BTreeMap;

use html5gum::{HtmlString, Spanned};

pub(super) type Attrs = BTreeMap<HtmlString, Spanned<HtmlString, ()>>;

pub(super) fn attr<'a>(attrs: &'a Attrs, name: &str) -> Option<&'a [u8]> {
    attrs.get(name.as_bytes()).map(|v| v.value.as_slice())
}

/// Elements without content or end tag.
#[rustfmt::skip]
pub(super) const VOID: &[&[u8]] = &[
    b"area", b"base", b"br", b"col", b"embed", b"hr", b"img", b"input", b"link", b"meta", b"param",
    b"source", b"track", b"wbr",
];

/// Elements whose content is never text of the page.
#[rustfmt::skip]
const DROPPED: &[&[u8]] = &[
    b"script", b"style", b"noscript", b"template", b"svg", b"canvas", b"iframe", b"object",
    b"nav", b"aside", b"button", b"select", b"textarea", b"datalist", b"audio", b"video", b"dialog",
    b"noembed", b"noframes",
];

/// Elements that end the paragraph before them and start a new one after.
#[rustfmt::skip]
pub(super) const BLOCKS: &[&[u8]] = &[
    b"address", b"article", b"aside", b"blockquote", b"body", b"center", b"dd", b"details",
    b"dialog", b"dir", b"div", b"dl", b"dt", b"fieldset", b"figcaption", b"figure", b"footer",
    b"form", b"header", b"hgroup", b"html", b"legend", b"main", b"nav", b"p", b"section",
    b"summary", b"caption", b"tbody", b"thead", b"tfoot", b"td", b"th", b"tr", b"option",
];

/// Roles of page chrome, dropped wherever they are.
#[rustfmt::skip]
const HIDDEN_ROLES: &[&[u8]] = &[
    b"navigation", b"search", b"complementary", b"menu", b"menubar", b"toolbar", b"dialog",
];

/// Class names that hide an element (utility classes of common CSS frameworks).
#[rustfmt::skip]
const HIDDEN_CLASSES: &[&str] = &[
    "hidden", "hide", "d-none", "sr-only", "visually-hidden", "screen-reader-text",
];

/// Parts of class names and ids of page chrome on containers, unless they also name content.
/// Deliberately short: "menu" is left out (a restaurant's menu is content).
#[rustfmt::skip]
const CHROME_HINTS: &[&str] = &[
    "dropdown", "navbar", "sidebar", "breadcrumb", "cookie", "toolbar", "skip-link", "skiplink",
    "popup", "modal",
];
const CONTENT_HINTS: &[&str] = &["content", "article", "main", "body", "post", "entry"];

pub(super) fn heading_level(name: &[u8]) -> Option<usize> {
    match name {
        [b'h', d @ b'1'..=b'6'] => Some(usize::from(d - b'0')),
        _ => None,
    }
}

/// Whether an element and its content are left out. `in_content`: inside `main` or `article`,
/// where headers and footers belong to the content.
pub(super) fn dropped(name: &[u8], attrs: &Attrs, self_closing: bool, in_content: bool) -> bool {
    if self_closing && matches!(name, b"svg" | b"math") {
        return false;
    }
    if DROPPED.contains(&name) || attrs.contains_key(b"hidden".as_slice()) {
        return true;
    }
    // Page headers and footers, not those of the content (pages misuse the roles inside it).
    let role = attr(attrs, "role").unwrap_or_default();
    let chrome = matches!(name, b"header" | b"footer")
        || role.eq_ignore_ascii_case(b"banner")
        || role.eq_ignore_ascii_case(b"contentinfo");
    if chrome && !in_content {
        return true;
    }
    if attr(attrs, "aria-hidden").is_some_and(|v| v.eq_ignore_ascii_case(b"true")) {
        return true;
    }
    if HIDDEN_ROLES.iter().any(|r| role.eq_ignore_ascii_case(r)) || chrome_by_name(name, attrs) {
        return true;
    }
    attr(attrs, "style").is_some_and(|style| {
        let style: Vec<u8> = style
            .iter()
            .filter(|b| !b.is_ascii_whitespace())
            .map(u8::to_ascii_lowercase)
            .collect();
        memchr::memmem::find(&style, b"display:none").is_some()
            || memchr::memmem::find(&style, b"visibility:hidden").is_some()
    })
}

fn chrome_by_name(name: &[u8], attrs: &Attrs) -> bool {
    let class = attr(attrs, "class")
        .map(String::from_utf8_lossy)
        .unwrap_or_default()
        .to_ascii_lowercase();
    if class
        .split_ascii_whitespace()
        .any(|c| HIDDEN_CLASSES.contains(&c))
    {
        return true;
    }
    if !matches!(
        name,
        b"div" | b"section" | b"ul" | b"ol" | b"span" | b"form"
    ) {
        return false;
    }
    let id = attr(attrs, "id")
        .map(String::from_utf8_lossy)
        .unwrap_or_default()
        .to_ascii_lowercase();
    let names = format!("{class} {id}");
    CHROME_HINTS.iter().any(|h| names.contains(h))
        && !CONTENT_HINTS.iter().any(|h| names.contains(h))
}
