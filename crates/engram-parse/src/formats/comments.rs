//! Comments of PowerPoint and Excel files, legacy and threaded: Excel's cell notes
//! (`xl/comments1.xml`) and threaded comments (`xl/threadedComments/…`, people in
//! `xl/persons/person.xml`), PowerPoint's comments (`ppt/comments/comment1.xml`, authors in
//! `ppt/commentAuthors.xml`) and modern comments with their replies
//! (`ppt/comments/modernComment_….xml`, authors in `ppt/authors.xml`). Each comment keeps its
//! anchor (the cell it is on; the slide is where it is written) and its author.

use std::collections::HashMap;

use quick_xml::events::Event;
use quick_xml::Reader;

use crate::formats::ooxml::{attr, local, reference_text, text_of};

/// Comments read per part at most.
const COMMENTS_MAX: usize = 10_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Comment {
    /// The cell a comment is on (`B2`); empty where the part does not say (slides).
    pub anchor: String,
    pub author: String,
    pub text: String,
}

impl Comment {
    /// `B2 (Ana): text`, `(Ana): text`, or the text alone.
    pub(crate) fn line(&self) -> String {
        let who = match (self.anchor.is_empty(), self.author.is_empty()) {
            (true, true) => String::new(),
            (false, true) => format!("{}: ", self.anchor),
            (true, false) => format!("({}): ", self.author),
            (false, false) => format!("{} ({}): ", self.anchor, self.author),
        };
        format!("{who}{}", self.text)
    }
}

/// Authors by id: `<author id=… name=…>`, `<person id=… displayName=…>`, `<cmAuthor id=…
/// name=…>`, or Excel's `<author>Name</author>` numbered from 0.
pub(crate) fn authors(xml: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut reader = Reader::from_str(xml);
    let (mut numbered, mut in_author, mut name) = (0usize, false, String::new());
    loop {
        match reader.read_event() {
            Ok(Event::Start(e) | Event::Empty(e))
                if matches!(
                    local(e.name().as_ref()),
                    b"author" | b"person" | b"cmAuthor"
                ) =>
            {
                let given = attr(&e, b"name").or_else(|| attr(&e, b"displayName"));
                match (attr(&e, b"id"), given) {
                    (Some(id), Some(name)) => {
                        out.insert(id, name);
                    }
                    _ => in_author = true,
                }
            }
            Ok(Event::Text(t)) if in_author => name.push_str(&text_of(&t)),
            Ok(Event::End(e)) if in_author && local(e.name().as_ref()) == b"author" => {
                out.insert(
                    numbered.to_string(),
                    std::mem::take(&mut name).trim().to_owned(),
                );
                numbered += 1;
                in_author = false;
            }
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => {}
        }
    }
    out
}

/// The comments of one part, each thread's replies after the comment they answer.
pub(crate) fn comments(xml: &str, authors: &HashMap<String, String>) -> Vec<Comment> {
    // A comment takes its place when it opens, so a thread reads in order.
    let mut out: Vec<Comment> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    let mut reader = Reader::from_str(xml);
    loop {
        match reader.read_event() {
            Ok(Event::Start(e))
                if out.len() < COMMENTS_MAX
                    && matches!(
                        local(e.name().as_ref()),
                        b"comment" | b"threadedComment" | b"cm" | b"reply"
                    ) =>
            {
                let anchor = attr(&e, b"ref")
                    .or_else(|| open.last().map(|i| out[*i].anchor.clone()))
                    .unwrap_or_default();
                let author = attr(&e, b"authorId")
                    .or_else(|| attr(&e, b"personId"))
                    .and_then(|id| authors.get(&id).cloned())
                    .unwrap_or_default();
                open.push(out.len());
                out.push(Comment {
                    anchor,
                    author,
                    text: String::new(),
                });
            }
            Ok(Event::Text(t)) => {
                if let Some(i) = open.last() {
                    out[*i].text.push_str(&text_of(&t));
                }
            }
            Ok(Event::GeneralRef(r)) => {
                if let Some(i) = open.last() {
                    out[*i].text.push_str(&reference_text(&r));
                }
            }
            Ok(Event::End(e)) => match local(e.name().as_ref()) {
                b"comment" | b"threadedComment" | b"cm" | b"reply" => {
                    open.pop();
                }
                // Paragraphs inside a comment separate its words.
                b"p" => {
                    if let Some(i) = open.last() {
                        out[*i].text.push(' ');
                    }
                }
                _ => {}
            },
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => {}
        }
    }
    for c in &mut out {
        c.text = c.text.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    out.retain(|c| !c.text.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excel_notes_and_threads_keep_their_cell_and_author() {
        let people =
            authors(r#"<personList><person displayName="Ana Silva" id="{P1}"/></personList>"#);
        let threaded = comments(
            r#"<ThreadedComments><threadedComment ref="B2" personId="{P1}" id="{1}"><text>Is this the final figure?</text></threadedComment>
               <threadedComment ref="B2" personId="{P9}" parentId="{1}"><text>Yes, audited.</text></threadedComment></ThreadedComments>"#,
            &people,
        );
        assert_eq!(
            threaded.iter().map(Comment::line).collect::<Vec<_>>(),
            [
                "B2 (Ana Silva): Is this the final figure?",
                "B2: Yes, audited."
            ]
        );
        let legacy_authors =
            authors("<comments><authors><author>Ben</author></authors></comments>");
        let notes = comments(
            r#"<comments><commentList><comment ref="C7" authorId="0"><text><r><t>Checked </t></r><r><t>twice</t></r></text></comment></commentList></comments>"#,
            &legacy_authors,
        );
        assert_eq!(notes[0].line(), "C7 (Ben): Checked twice");
    }

    #[test]
    fn powerpoint_comments_and_replies() {
        let people =
            authors(r#"<p188:authorLst><p188:author id="{A}" name="Cy"/></p188:authorLst>"#);
        let found = comments(
            r#"<p188:cmLst><p188:cm id="{1}" authorId="{A}"><p188:txBody><a:p><a:r><a:t>Move this chart</a:t></a:r></a:p></p188:txBody>
               <p188:replyLst><p188:reply id="{2}" authorId="{A}"><p188:txBody><a:p><a:r><a:t>Done</a:t></a:r></a:p></p188:txBody></p188:reply></p188:replyLst></p188:cm></p188:cmLst>"#,
            &people,
        );
        let lines: Vec<String> = found.iter().map(Comment::line).collect();
        assert_eq!(lines, ["(Cy): Move this chart", "(Cy): Done"]);
    }
}
