//! A stateful fake of the part of Linear's GraphQL API (`POST /graphql`) the linear connector
//! reads: teams, projects (their overviews), issues (states, labels, people, projects, cycles;
//! edits move `updatedAt`, archiving and trashing), comments, the `issues`/`comments` filters on
//! team, project and `updatedAt`,
//! connections paged with `first`/`after`/`pageInfo`, a personal API key (`Authorization: <key>`)
//! and an OAuth token (`Bearer`), and rate limiting (`RATELIMITED` with Linear's headers).
//!
//! It is a test double of Linear, so it is held to Linear's own schema: each request's document
//! is parsed and validated against it (apollo-compiler) and its variables coerced to their
//! declared types before the fake answers, and [`assert_conforms`] checks every exchange again,
//! including each answer against the types of what was selected (every selected field present,
//! no other, nullability, lists, scalars and enum values). Linear ships no `schema.graphql` on
//! npm, but its SDK `@linear/sdk` is generated from the schema, and the type declarations it
//! ships hold the whole of it; `make setup-test` installs them and [`sdl_from_declarations`]
//! reads the schema back from them.
#![allow(clippy::unwrap_used)] // test code

use std::sync::{Arc, Mutex, OnceLock};

use apollo_compiler::executable::{Field, Selection, SelectionSet};
use apollo_compiler::schema::{ExtendedType, Type};
use apollo_compiler::validation::Valid;
use apollo_compiler::{ExecutableDocument, Schema};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Map, Value};

use crate::common::connectors::{clock_time, Loopback, Serving};

/// When a rate limit the fake imposes resets (epoch milliseconds).
pub(crate) const RATE_RESET_MS: i64 = 1_893_456_000_000;

/// One request and its answer, as the fake saw them.
#[derive(Debug, Clone)]
pub(crate) struct Exchange {
    pub query: String,
    pub variables: Value,
    pub operation: String,
    pub status: u16,
    pub answer: Value,
}

struct Team {
    id: String,
    key: String,
    name: String,
    private: bool,
    created_at: String,
}

#[derive(Clone)]
struct Issue {
    id: String,
    team: String,
    number: u64,
    title: String,
    description: Option<String>,
    state: (String, String),
    priority: u8,
    labels: Vec<String>,
    assignee: Option<String>,
    creator: Option<String>,
    /// The project's id.
    project: Option<String>,
    cycle: Option<u32>,
    created_at: String,
    updated_at: String,
    archived_at: Option<String>,
    trashed: Option<bool>,
}

struct Project {
    id: String,
    name: String,
    description: String,
    content: Option<String>,
    lead: Option<String>,
    created_at: String,
    updated_at: String,
}

#[derive(Clone)]
struct Comment {
    id: String,
    issue: String,
    body: String,
    user: Option<String>,
    created_at: String,
    updated_at: String,
}

#[derive(Default)]
struct Shared {
    key: String,
    token: String,
    rate_limited: bool,
    teams: Vec<Team>,
    projects: Vec<Project>,
    issues: Vec<Issue>,
    comments: Vec<Comment>,
    /// Seconds since 2026-03-01T00:00:00Z: each change moves it a minute on.
    clock: u64,
    next_id: u64,
    log: Vec<Exchange>,
}

type SharedState = Arc<Mutex<Shared>>;

impl Shared {
    fn tick(&mut self) -> String {
        self.clock += 60;
        format!("{}.000Z", clock_time(self.clock))
    }

    fn id(&mut self) -> String {
        self.next_id += 1;
        let n = self.next_id;
        format!("{n:08x}-5c1e-4a0b-9d2e-{n:012x}")
    }

    fn issue_mut(&mut self, identifier: &str) -> &mut Issue {
        let (key, number) = identifier.split_once('-').unwrap();
        let team = self.teams.iter().find(|t| t.key == key).unwrap().id.clone();
        let number: u64 = number.parse().unwrap();
        self.issues
            .iter_mut()
            .find(|i| i.team == team && i.number == number)
            .unwrap()
    }
}

/// Linear's schema, read once from `@linear/sdk`'s declarations (`make setup-test` installs
/// them).
pub(crate) fn schema() -> &'static Valid<Schema> {
    static SCHEMA: OnceLock<Valid<Schema>> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let path = crate::common::cache_dir().join("linear-schema/sdk.d.mts");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "Linear's GraphQL schema types {} cannot be read ({e}): run `make setup-test`",
                path.display()
            )
        });
        let sdl = sdl_from_declarations(&text).unwrap_or_else(|e| panic!("{e}"));
        Schema::parse_and_validate(sdl, "linear.graphql")
            .unwrap_or_else(|e| panic!("Linear's schema does not validate: {}", e.errors))
    })
}

/// Linear's schema as SDL, read from `@linear/sdk`'s type declarations (graphql-codegen's
/// `typescript` output of the schema): each object type (`__typename`), interface (what object
/// types are `&`-joined with), input object, `<Type><Field>Args` argument list, enum (its string
/// values), union and custom scalar, with every list and nullability (`Maybe`/`InputMaybe`).
/// Descriptions, default values and directives are not carried (validation needs none of them).
pub(crate) fn sdl_from_declarations(text: &str) -> Result<String, String> {
    use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
    #[derive(Default)]
    struct Block {
        name: String,
        implements: Vec<String>,
        typename: bool,
        fields: Vec<(String, String)>,
    }
    /// A TypeScript type as a GraphQL one.
    fn graphql(ts: &str) -> Result<String, String> {
        fn inner(ts: &str) -> Result<(String, bool), String> {
            let ts = ts.trim();
            if let Some(t) = ts
                .strip_prefix("Maybe<")
                .or_else(|| ts.strip_prefix("InputMaybe<"))
                .and_then(|t| t.strip_suffix('>'))
            {
                return Ok((inner(t)?.0, true));
            }
            if let Some(t) = ts.strip_prefix("Array<").and_then(|t| t.strip_suffix('>')) {
                let (item, nullable) = inner(t)?;
                let item = if nullable { item } else { format!("{item}!") };
                return Ok((format!("[{item}]"), false));
            }
            if let Some(t) = ts
                .strip_prefix("Scalars[\"")
                .and_then(|t| t.strip_suffix("\"]"))
            {
                return Ok((t.to_owned(), false));
            }
            if !ts.is_empty() && ts.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Ok((ts.to_owned(), false));
            }
            Err(format!("cannot read the type `{ts}`"))
        }
        let (named, nullable) = inner(ts)?;
        Ok(if nullable { named } else { format!("{named}!") })
    }
    let mut scalars: Vec<String> = Vec::new();
    let mut blocks: Vec<Block> = Vec::new();
    let mut enums: Vec<(String, Vec<String>)> = Vec::new();
    let mut unions: Vec<(String, Vec<String>)> = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("declare enum ") {
            let name = rest.trim_end_matches(" {").trim().to_owned();
            let mut values = Vec::new();
            for line in lines.by_ref() {
                if line == "}" {
                    break;
                }
                if let Some((_, value)) = line.trim().split_once(" = \"") {
                    values.push(value.trim_end_matches(',').trim_end_matches('"').to_owned());
                }
            }
            enums.push((name, values));
            continue;
        }
        let Some(rest) = line.strip_prefix("type ") else {
            continue;
        };
        let name_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let (name, tail) = rest.split_at(name_end);
        if tail.starts_with('<') {
            // A generic helper (`Maybe<T>`, `Exact<T extends {…}>`): skipped to its end.
            let mut end = line.ends_with(';');
            while !end {
                match lines.next() {
                    Some(l) => end = !l.starts_with(' ') && l.ends_with(';'),
                    None => break,
                }
            }
            continue;
        }
        let Some(body) = tail.strip_prefix(" = ") else {
            continue;
        };
        if name.ends_with("Fragment") {
            break; // the types of the SDK's own operations follow the schema's
        }
        if name == "Scalars" {
            for line in lines.by_ref() {
                if line == "};" {
                    break;
                }
                let trimmed = line.trim();
                if let Some((field, _)) = trimmed.split_once(": ") {
                    if !trimmed.starts_with('/') && !trimmed.starts_with('*') {
                        scalars.push(field.to_owned());
                    }
                }
            }
            continue;
        }
        if let Some(prefix) = body.strip_suffix('{') {
            let mut block = Block {
                name: name.to_owned(),
                implements: prefix
                    .split('&')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
                ..Block::default()
            };
            for line in lines.by_ref() {
                if line == "};" {
                    break;
                }
                let trimmed = line.trim();
                if trimmed.starts_with("/*") || trimmed.starts_with('*') {
                    continue;
                }
                let (field, ty) = trimmed
                    .strip_suffix(';')
                    .and_then(|t| t.split_once(": "))
                    .ok_or_else(|| format!("{name}: cannot read `{trimmed}`"))?;
                let field = field.trim_end_matches('?');
                if field == "__typename" {
                    block.typename = true;
                } else {
                    block.fields.push((field.to_owned(), ty.to_owned()));
                }
            }
            blocks.push(block);
        } else if let Some(members) = body.strip_suffix(';') {
            unions.push((
                name.to_owned(),
                members.split('|').map(|m| m.trim().to_owned()).collect(),
            ));
        }
    }
    let interfaces: BTreeSet<&str> = blocks
        .iter()
        .flat_map(|b| b.implements.iter().map(String::as_str))
        .collect();
    let typed: BTreeMap<&str, &Block> = blocks
        .iter()
        .filter(|b| b.typename || interfaces.contains(b.name.as_str()))
        .map(|b| (b.name.as_str(), b))
        .collect();
    let pascal = |field: &str| {
        let mut out = String::new();
        let mut upper = true;
        for c in field.chars() {
            if c == '_' {
                upper = true;
            } else if upper {
                out.extend(c.to_uppercase());
                upper = false;
            } else {
                out.push(c);
            }
        }
        out
    };
    // `<Type><Field>Args` blocks: the arguments of that field.
    let mut arguments: HashMap<(String, String), &Block> = HashMap::new();
    for block in &blocks {
        if block.typename || interfaces.contains(block.name.as_str()) {
            continue;
        }
        let Some(stem) = block.name.strip_suffix("Args") else {
            continue;
        };
        for (cut, _) in stem.char_indices().skip(1) {
            let (owner, field) = stem.split_at(cut);
            if let Some(owner) = typed.get(owner) {
                if let Some((name, _)) = owner.fields.iter().find(|(f, _)| pascal(f) == field) {
                    arguments.insert((owner.name.clone(), name.clone()), block);
                }
            }
        }
    }
    let argument_blocks: HashSet<&str> = arguments.values().map(|b| b.name.as_str()).collect();
    let mut sdl = String::new();
    for scalar in &scalars {
        if !["ID", "String", "Boolean", "Int", "Float"].contains(&scalar.as_str()) {
            sdl.push_str(&format!("scalar {scalar}\n"));
        }
    }
    for (name, values) in &enums {
        sdl.push_str(&format!("enum {name} {{ {} }}\n", values.join(" ")));
    }
    for (name, members) in &unions {
        sdl.push_str(&format!("union {name} = {}\n", members.join(" | ")));
    }
    for block in &blocks {
        if argument_blocks.contains(block.name.as_str()) {
            continue;
        }
        let kind = if interfaces.contains(block.name.as_str()) {
            "interface"
        } else if block.typename {
            "type"
        } else {
            "input"
        };
        sdl.push_str(&format!("{kind} {}", block.name));
        if !block.implements.is_empty() {
            sdl.push_str(&format!(" implements {}", block.implements.join(" & ")));
        }
        sdl.push_str(" {\n");
        for (field, ty) in &block.fields {
            sdl.push_str("  ");
            sdl.push_str(field);
            if let Some(args) = arguments.get(&(block.name.clone(), field.clone())) {
                let list: Result<Vec<String>, String> = args
                    .fields
                    .iter()
                    .map(|(a, t)| Ok(format!("{a}: {}", graphql(t)?)))
                    .collect();
                sdl.push_str(&format!("({})", list?.join(", ")));
            }
            sdl.push_str(&format!(": {}\n", graphql(ty)?));
        }
        sdl.push_str("}\n");
    }
    Ok(sdl)
}

/// A document parsed and validated against Linear's schema, with the named operation.
pub(crate) fn validated(query: &str) -> Result<Valid<ExecutableDocument>, String> {
    ExecutableDocument::parse_and_validate(schema(), query, "request.graphql")
        .map_err(|e| e.errors.to_string())
}

/// The request's variables coerced to the types its operation declares.
fn coerce(document: &Valid<ExecutableDocument>, variables: &Value) -> Result<(), String> {
    let operation = document
        .operations
        .get(None)
        .map_err(|e| format!("{e:?}"))?;
    let values: apollo_compiler::response::JsonMap =
        serde_json::from_value(if variables.is_null() {
            json!({})
        } else {
            variables.clone()
        })
        .map_err(|e| e.to_string())?;
    apollo_compiler::request::coerce_variable_values(schema(), operation, &values)
        .map(|_| ())
        .map_err(|e| format!("{e:?}"))
}

/// The fields of a selection set, fragments spread.
fn fields<'a>(document: &'a ExecutableDocument, set: &'a SelectionSet) -> Vec<&'a Field> {
    let mut out = Vec::new();
    for selection in &set.selections {
        match selection {
            Selection::Field(field) => out.push(field.as_ref()),
            Selection::FragmentSpread(spread) => {
                if let Some(fragment) = document.fragments.get(&spread.fragment_name) {
                    out.extend(fields(document, &fragment.selection_set));
                }
            }
            Selection::InlineFragment(inline) => {
                out.extend(fields(document, &inline.selection_set))
            }
        }
    }
    out
}

/// Checks `value` against the type `ty` of what was selected (`set`), adding what does not fit.
fn check_value(
    document: &ExecutableDocument,
    ty: &Type,
    set: &SelectionSet,
    value: &Value,
    at: &str,
    problems: &mut Vec<String>,
) {
    if value.is_null() {
        if ty.is_non_null() {
            problems.push(format!("{at}: null for the non-null {ty}"));
        }
        return;
    }
    if ty.is_list() {
        match value.as_array() {
            Some(items) => {
                for (n, item) in items.iter().enumerate() {
                    check_value(
                        document,
                        ty.item_type(),
                        set,
                        item,
                        &format!("{at}[{n}]"),
                        problems,
                    );
                }
            }
            None => problems.push(format!("{at}: not a list for {ty}")),
        }
        return;
    }
    let named = ty.inner_named_type();
    let fits = match schema().types.get(named) {
        Some(ExtendedType::Scalar(_)) => match named.as_str() {
            "Int" => value.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
            "Float" => value.is_number(),
            "String" => value.is_string(),
            "ID" => value.is_string() || value.is_i64(),
            "Boolean" => value.is_boolean(),
            "DateTime" => value.as_str().is_some_and(|s| {
                time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
                    .is_ok()
            }),
            _ => true,
        },
        Some(ExtendedType::Enum(e)) => value
            .as_str()
            .is_some_and(|v| e.values.keys().any(|k| k.as_str() == v)),
        Some(ExtendedType::Object(_) | ExtendedType::Interface(_) | ExtendedType::Union(_)) => {
            let Some(object) = value.as_object() else {
                problems.push(format!("{at}: not an object for {ty}"));
                return;
            };
            let selected = fields(document, set);
            for field in &selected {
                let key = field.response_key().as_str();
                match object.get(key) {
                    Some(v) => check_value(
                        document,
                        &field.definition.ty,
                        &field.selection_set,
                        v,
                        &format!("{at}.{key}"),
                        problems,
                    ),
                    None => problems.push(format!("{at}.{key}: selected but missing")),
                }
            }
            for key in object.keys() {
                if !selected.iter().any(|f| f.response_key().as_str() == key) {
                    problems.push(format!("{at}.{key}: answered but not selected"));
                }
            }
            true
        }
        Some(ExtendedType::InputObject(_)) | None => false,
    };
    if !fits {
        problems.push(format!("{at}: {value} is not a {ty}"));
    }
}

/// What does not fit Linear's schema in one exchange: the document, its variables, and the
/// answer (`data` against the selection's types; `errors` in GraphQL's shape).
pub(crate) fn problems_of(exchange: &Exchange) -> Vec<String> {
    let at = format!("{} -> {}", exchange.operation, exchange.status);
    let document = match validated(&exchange.query) {
        Ok(document) => document,
        Err(e) => return vec![format!("{at}: the document is not valid: {e}")],
    };
    let mut problems = Vec::new();
    if let Err(e) = coerce(&document, &exchange.variables) {
        problems.push(format!("{at}: the variables do not fit: {e}"));
    }
    let Some(answer) = exchange.answer.as_object() else {
        return vec![format!("{at}: the answer is not an object")];
    };
    for key in answer.keys() {
        if !["data", "errors", "extensions"].contains(&key.as_str()) {
            problems.push(format!("{at}: `{key}` in a GraphQL answer"));
        }
    }
    if let Some(errors) = answer.get("errors") {
        let well_formed = errors.as_array().is_some_and(|errors| {
            !errors.is_empty()
                && errors.iter().all(|e| {
                    e.get("message").is_some_and(Value::is_string)
                        && e.pointer("/extensions/code").is_some_and(Value::is_string)
                })
        });
        if !well_formed {
            problems.push(format!("{at}: malformed errors {errors}"));
        }
    }
    match answer.get("data") {
        Some(Value::Null) | None if answer.contains_key("errors") => {}
        Some(data) => {
            let operation = document.operations.get(None).unwrap();
            let root = Type::Named(operation.selection_set.ty.clone()).non_null();
            check_value(
                &document,
                &root,
                &operation.selection_set,
                data,
                "data",
                &mut problems,
            );
        }
        None => problems.push(format!("{at}: neither data nor errors")),
    }
    problems
}

/// Checks every exchange against Linear's schema; panics with every problem found.
pub(crate) fn assert_conforms(exchanges: &[Exchange]) {
    let problems: Vec<String> = exchanges.iter().flat_map(problems_of).collect();
    assert!(
        problems.is_empty(),
        "the exchanges stray from Linear's schema:\n{}",
        problems.join("\n")
    );
}

/// A GraphQL error answer in Linear's shape.
fn error_answer(code: &str, kind: &str, message: &str) -> Value {
    json!({"errors": [{"message": message, "extensions": {
        "code": code, "type": kind, "userError": true, "userPresentableMessage": message}}]})
}

/// What a field resolves to.
enum Resolved {
    Leaf(Value),
    Object(Obj),
    List(Vec<Obj>),
}

/// An object of the fake's data.
#[derive(Clone)]
enum Obj {
    Query,
    Team(usize),
    Issue(usize),
    Comment(usize),
    Person(String),
    State(String, String),
    Project(usize),
    ProjectStatus,
    Cycle(u32),
    Label(String),
    PageInfo(bool, Option<String>),
    /// A connection: its nodes and whether more follow.
    Connection(Vec<Obj>, bool, Option<String>),
}

/// An argument's value with the request's variables put in.
fn argument(field: &Field, name: &str, variables: &Value) -> Value {
    fn json_of(value: &apollo_compiler::ast::Value, variables: &Value) -> Value {
        use apollo_compiler::ast::Value as V;
        match value {
            V::Null => Value::Null,
            V::Enum(name) => Value::from(name.as_str()),
            V::Variable(name) => variables.get(name.as_str()).cloned().unwrap_or(Value::Null),
            V::String(s) => Value::from(s.as_str()),
            V::Float(f) => json!(f.try_to_f64().unwrap()),
            V::Int(i) => json!(i.try_to_i32().unwrap()),
            V::Boolean(b) => Value::from(*b),
            V::List(items) => Value::Array(items.iter().map(|v| json_of(v, variables)).collect()),
            V::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(k, v)| (k.to_string(), json_of(v, variables)))
                    .collect(),
            ),
        }
    }
    field
        .arguments
        .iter()
        .find(|a| a.name.as_str() == name)
        .map(|a| json_of(&a.value, variables))
        .unwrap_or(Value::Null)
}

/// A page of `items` (each with its cursor) by `first` and `after`, or the `last` ones.
fn paginate(items: Vec<(String, Obj)>, first: &Value, after: &Value, last: &Value) -> Obj {
    let start = match after.as_str() {
        Some(cursor) => items
            .iter()
            .position(|(c, _)| c == cursor)
            .map_or(items.len(), |p| p + 1),
        None => 0,
    };
    let mut rest: Vec<(String, Obj)> = items.into_iter().skip(start).collect();
    if let Some(last) = last.as_u64() {
        rest = rest.split_off(rest.len().saturating_sub(last as usize));
    }
    let first = first.as_u64().unwrap_or(50) as usize;
    let more = rest.len() > first;
    let page: Vec<(String, Obj)> = rest.into_iter().take(first).collect();
    let end = page.last().map(|(c, _)| c.clone());
    Obj::Connection(page.into_iter().map(|(_, o)| o).collect(), more, end)
}

/// Whether `at` passes a `DateComparator` (the parts the connector uses).
fn date_passes(comparator: &Value, at: &str) -> Result<bool, String> {
    let mut passes = true;
    for (op, bound) in comparator.as_object().into_iter().flatten() {
        let bound = bound.as_str().unwrap_or_default();
        passes &= match op.as_str() {
            "gt" => at > bound,
            "gte" => at >= bound,
            "lt" => at < bound,
            other => return Err(format!("the fake does not filter dates by `{other}`")),
        };
    }
    Ok(passes)
}

impl Shared {
    /// Whether an issue passes an `IssueFilter` (team id and `updatedAt`).
    fn issue_passes(&self, filter: &Value, issue: &Issue) -> Result<bool, String> {
        let mut passes = true;
        for (key, value) in filter.as_object().into_iter().flatten() {
            passes &= match key.as_str() {
                "team" => match value.pointer("/id/eq").and_then(Value::as_str) {
                    Some(team) if value.as_object().is_some_and(|o| o.len() == 1) => {
                        issue.team == team
                    }
                    _ => return Err(format!("the fake does not filter teams by {value}")),
                },
                "project" => match value.pointer("/id/eq").and_then(Value::as_str) {
                    Some(project) if value.as_object().is_some_and(|o| o.len() == 1) => {
                        issue.project.as_deref() == Some(project)
                    }
                    _ => return Err(format!("the fake does not filter projects by {value}")),
                },
                "updatedAt" => date_passes(value, &issue.updated_at)?,
                other => return Err(format!("the fake does not filter issues by `{other}`")),
            };
        }
        Ok(passes)
    }

    fn comment_passes(&self, filter: &Value, comment: &Comment) -> Result<bool, String> {
        let mut passes = true;
        for (key, value) in filter.as_object().into_iter().flatten() {
            passes &= match key.as_str() {
                "updatedAt" => date_passes(value, &comment.updated_at)?,
                "issue" => {
                    let issue = self.issues.iter().find(|i| i.id == comment.issue).unwrap();
                    self.issue_passes(value, issue)?
                }
                other => return Err(format!("the fake does not filter comments by `{other}`")),
            };
        }
        Ok(passes)
    }

    /// Issues (or comments) in the order asked: `updatedAt` newest first, else `createdAt`.
    fn ordered<T>(
        items: Vec<(usize, &T)>,
        order: &Value,
        at: impl Fn(&T) -> (String, String),
    ) -> Vec<usize> {
        let mut items = items;
        if order.as_str() == Some("updatedAt") {
            items.sort_by(|a, b| at(b.1).1.cmp(&at(a.1).1));
        } else {
            items.sort_by(|a, b| at(a.1).0.cmp(&at(b.1).0));
        }
        items.into_iter().map(|(n, _)| n).collect()
    }

    fn resolve(&self, obj: &Obj, field: &Field, variables: &Value) -> Result<Resolved, String> {
        let name = field.name.as_str();
        let arg = |n: &str| argument(field, n, variables);
        let leaf = |v: Value| Ok(Resolved::Leaf(v));
        let page = |items: Vec<(String, Obj)>| {
            Ok(Resolved::Object(paginate(
                items,
                &arg("first"),
                &arg("after"),
                &arg("last"),
            )))
        };
        let person = |who: &Option<String>| {
            Ok(who.clone().map_or(Resolved::Leaf(Value::Null), |p| {
                Resolved::Object(Obj::Person(p))
            }))
        };
        let unknown = || Err(format!("the fake does not serve `{name}` here"));
        match obj {
            Obj::Query => match name {
                "teams" => {
                    let teams = self
                        .teams
                        .iter()
                        .enumerate()
                        .map(|(n, t)| (t.id.clone(), Obj::Team(n)))
                        .collect();
                    page(teams)
                }
                "issues" => {
                    let (filter, archived) = (arg("filter"), arg("includeArchived") == json!(true));
                    let mut passing = Vec::new();
                    for (n, issue) in self.issues.iter().enumerate() {
                        if (archived || issue.archived_at.is_none())
                            && self.issue_passes(&filter, issue)?
                        {
                            passing.push((n, issue));
                        }
                    }
                    let order = Self::ordered(passing, &arg("orderBy"), |i: &Issue| {
                        (i.created_at.clone(), i.updated_at.clone())
                    });
                    let items = order
                        .into_iter()
                        .map(|n| (self.issues[n].id.clone(), Obj::Issue(n)))
                        .collect();
                    page(items)
                }
                "comments" => {
                    let filter = arg("filter");
                    let mut passing = Vec::new();
                    for (n, comment) in self.comments.iter().enumerate() {
                        if self.comment_passes(&filter, comment)? {
                            passing.push((n, comment));
                        }
                    }
                    let order = Self::ordered(passing, &arg("orderBy"), |c: &Comment| {
                        (c.created_at.clone(), c.updated_at.clone())
                    });
                    let items = order
                        .into_iter()
                        .map(|n| (self.comments[n].id.clone(), Obj::Comment(n)))
                        .collect();
                    page(items)
                }
                "projects" => {
                    let projects = self
                        .projects
                        .iter()
                        .enumerate()
                        .map(|(n, p)| (p.id.clone(), Obj::Project(n)))
                        .collect();
                    page(projects)
                }
                "project" => {
                    let id = arg("id");
                    match self
                        .projects
                        .iter()
                        .position(|p| Some(p.id.as_str()) == id.as_str())
                    {
                        Some(n) => Ok(Resolved::Object(Obj::Project(n))),
                        None => Err("Entity not found: Project".to_owned()),
                    }
                }
                "issue" => {
                    let id = arg("id");
                    let id = id.as_str().unwrap_or_default();
                    let found = self.issues.iter().position(|i| {
                        i.id == id
                            || self
                                .teams
                                .iter()
                                .any(|t| t.id == i.team && format!("{}-{}", t.key, i.number) == id)
                    });
                    match found {
                        Some(n) => Ok(Resolved::Object(Obj::Issue(n))),
                        None => Err("Entity not found: Issue".to_owned()),
                    }
                }
                _ => unknown(),
            },
            Obj::Team(n) => {
                let team = &self.teams[*n];
                match name {
                    "id" => leaf(json!(team.id)),
                    "key" => leaf(json!(team.key)),
                    "name" | "displayName" => leaf(json!(team.name)),
                    "description" => leaf(Value::Null),
                    "private" => leaf(json!(team.private)),
                    "createdAt" | "updatedAt" => leaf(json!(team.created_at)),
                    _ => unknown(),
                }
            }
            Obj::Issue(n) => {
                let issue = &self.issues[*n];
                let team = self.teams.iter().position(|t| t.id == issue.team).unwrap();
                let key = &self.teams[team].key;
                let optional = |v: &Option<String>| v.clone().map_or(Value::Null, Value::from);
                match name {
                    "id" => leaf(json!(issue.id)),
                    "identifier" => leaf(json!(format!("{key}-{}", issue.number))),
                    "number" => leaf(json!(issue.number as f64)),
                    "title" => leaf(json!(issue.title)),
                    "description" => leaf(optional(&issue.description)),
                    "url" => leaf(json!(format!(
                        "https://linear.app/acme/issue/{key}-{}",
                        issue.number
                    ))),
                    "priority" => leaf(json!(f64::from(issue.priority))),
                    "priorityLabel" => leaf(json!(
                        ["No priority", "Urgent", "High", "Medium", "Low"]
                            [usize::from(issue.priority)]
                    )),
                    "createdAt" => leaf(json!(issue.created_at)),
                    "updatedAt" => leaf(json!(issue.updated_at)),
                    "archivedAt" => leaf(optional(&issue.archived_at)),
                    "trashed" => leaf(issue.trashed.map_or(Value::Null, Value::from)),
                    "state" => Ok(Resolved::Object(Obj::State(
                        issue.state.0.clone(),
                        issue.state.1.clone(),
                    ))),
                    "team" => Ok(Resolved::Object(Obj::Team(team))),
                    "assignee" => person(&issue.assignee),
                    "creator" => person(&issue.creator),
                    "project" => Ok(issue
                        .project
                        .as_ref()
                        .and_then(|id| self.projects.iter().position(|p| &p.id == id))
                        .map_or(Resolved::Leaf(Value::Null), |n| {
                            Resolved::Object(Obj::Project(n))
                        })),
                    "cycle" => Ok(issue.cycle.map_or(Resolved::Leaf(Value::Null), |c| {
                        Resolved::Object(Obj::Cycle(c))
                    })),
                    "labels" => {
                        let labels = issue
                            .labels
                            .iter()
                            .map(|l| (l.clone(), Obj::Label(l.clone())))
                            .collect();
                        page(labels)
                    }
                    "comments" => {
                        let mut comments: Vec<(usize, &Comment)> = self
                            .comments
                            .iter()
                            .enumerate()
                            .filter(|(_, c)| c.issue == issue.id)
                            .collect();
                        comments.sort_by(|a, b| a.1.created_at.cmp(&b.1.created_at));
                        let items = comments
                            .into_iter()
                            .map(|(n, c)| (c.id.clone(), Obj::Comment(n)))
                            .collect();
                        page(items)
                    }
                    _ => unknown(),
                }
            }
            Obj::Comment(n) => {
                let comment = &self.comments[*n];
                match name {
                    "id" => leaf(json!(comment.id)),
                    "body" => leaf(json!(comment.body)),
                    "createdAt" => leaf(json!(comment.created_at)),
                    "updatedAt" => leaf(json!(comment.updated_at)),
                    "user" => person(&comment.user),
                    "issue" => Ok(Resolved::Object(Obj::Issue(
                        self.issues
                            .iter()
                            .position(|i| i.id == comment.issue)
                            .unwrap(),
                    ))),
                    _ => unknown(),
                }
            }
            Obj::Person(who) => match name {
                "name" => leaf(json!(who)),
                "displayName" => leaf(json!(who.to_lowercase().replace(' ', "."))),
                _ => unknown(),
            },
            Obj::State(state, kind) => match name {
                "name" => leaf(json!(state)),
                "type" => leaf(json!(kind)),
                _ => unknown(),
            },
            Obj::Project(n) => {
                let project = &self.projects[*n];
                match name {
                    "id" => leaf(json!(project.id)),
                    "name" => leaf(json!(project.name)),
                    "description" => leaf(json!(project.description)),
                    "content" => leaf(project.content.clone().map_or(Value::Null, Value::from)),
                    "url" => leaf(json!(format!(
                        "https://linear.app/acme/project/{}",
                        project.id
                    ))),
                    "createdAt" => leaf(json!(project.created_at)),
                    "updatedAt" => leaf(json!(project.updated_at)),
                    "startDate" => leaf(json!("2026-03-01")),
                    "targetDate" => leaf(Value::Null),
                    "status" => Ok(Resolved::Object(Obj::ProjectStatus)),
                    "lead" => person(&project.lead),
                    _ => unknown(),
                }
            }
            Obj::ProjectStatus => match name {
                "name" => leaf(json!("In Progress")),
                "type" => leaf(json!("started")),
                _ => unknown(),
            },
            Obj::Cycle(number) => match name {
                "number" => leaf(json!(f64::from(*number))),
                "name" => leaf(Value::Null),
                _ => unknown(),
            },
            Obj::Label(label) => match name {
                "name" => leaf(json!(label)),
                _ => unknown(),
            },
            Obj::PageInfo(more, end) => match name {
                "hasNextPage" => leaf(json!(more)),
                "hasPreviousPage" => leaf(json!(false)),
                "endCursor" | "startCursor" => leaf(end.clone().map_or(Value::Null, Value::from)),
                _ => unknown(),
            },
            Obj::Connection(nodes, more, end) => match name {
                "nodes" => Ok(Resolved::List(nodes.clone())),
                "pageInfo" => Ok(Resolved::Object(Obj::PageInfo(*more, end.clone()))),
                _ => unknown(),
            },
        }
    }

    /// The answer to a selection set on `obj`.
    fn select(
        &self,
        document: &ExecutableDocument,
        obj: &Obj,
        set: &SelectionSet,
        variables: &Value,
    ) -> Result<Value, String> {
        let mut out = Map::new();
        for field in fields(document, set) {
            let value = match self.resolve(obj, field, variables)? {
                Resolved::Leaf(v) => v,
                Resolved::Object(o) => {
                    self.select(document, &o, &field.selection_set, variables)?
                }
                Resolved::List(items) => Value::Array(
                    items
                        .iter()
                        .map(|o| self.select(document, o, &field.selection_set, variables))
                        .collect::<Result<_, _>>()?,
                ),
            };
            out.insert(field.response_key().to_string(), value);
        }
        Ok(Value::Object(out))
    }
}

/// The answer to one request, its status and headers.
fn answer(
    shared: &Shared,
    headers: &HeaderMap,
    request: &Value,
) -> (StatusCode, Vec<(&'static str, String)>, Value) {
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if authorization != shared.key && authorization != format!("Bearer {}", shared.token) {
        return (
            StatusCode::BAD_REQUEST,
            Vec::new(),
            error_answer(
                "AUTHENTICATION_ERROR",
                "authentication error",
                "Authentication required, not authenticated",
            ),
        );
    }
    if shared.rate_limited {
        return (
            StatusCode::BAD_REQUEST,
            vec![
                ("x-ratelimit-requests-limit", "5000".to_owned()),
                ("x-ratelimit-requests-remaining", "0".to_owned()),
                ("x-ratelimit-requests-reset", RATE_RESET_MS.to_string()),
            ],
            error_answer("RATELIMITED", "Ratelimited", "Rate limit exceeded"),
        );
    }
    let query = request["query"].as_str().unwrap_or_default();
    let variables = request.get("variables").cloned().unwrap_or(Value::Null);
    let document = match validated(query) {
        Ok(document) => document,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                Vec::new(),
                error_answer("GRAPHQL_VALIDATION_FAILED", "graphql error", &e),
            )
        }
    };
    if let Err(e) = coerce(&document, &variables) {
        return (
            StatusCode::BAD_REQUEST,
            Vec::new(),
            error_answer("BAD_USER_INPUT", "invalid input", &e),
        );
    }
    let operation = document.operations.get(None).unwrap();
    match shared.select(&document, &Obj::Query, &operation.selection_set, &variables) {
        Ok(data) => (StatusCode::OK, Vec::new(), json!({ "data": data })),
        Err(e) if e.starts_with("Entity not found") => (
            StatusCode::OK,
            Vec::new(),
            json!({"data": null, "errors": error_answer("INVALID_INPUT", "invalid input", &e)["errors"]}),
        ),
        Err(e) => panic!("the linear fake cannot answer: {e}"),
    }
}

async fn graphql(
    State(shared): State<SharedState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut s = shared.lock().unwrap();
    let (status, extra, body) = answer(&s, &headers, &request);
    let query = request["query"].as_str().unwrap_or_default().to_owned();
    let operation = query
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .split('(')
        .next()
        .unwrap_or_default()
        .to_owned();
    s.log.push(Exchange {
        query,
        variables: request.get("variables").cloned().unwrap_or(Value::Null),
        operation,
        status: status.as_u16(),
        answer: body.clone(),
    });
    let mut response = (status, axum::Json(body)).into_response();
    for (name, value) in extra {
        response.headers_mut().insert(name, value.parse().unwrap());
    }
    response
}

/// The fake, serving until dropped.
pub(crate) struct LinearFake {
    shared: SharedState,
    serving: Serving,
}

impl LinearFake {
    /// Starts the fake; `key` is the personal API key and `token` the OAuth token it accepts.
    pub(crate) async fn start(key: &str, token: &str) -> Self {
        schema(); // read before serving: a missing schema fails here, saying what to run
        let shared = Arc::new(Mutex::new(Shared {
            key: key.to_owned(),
            token: token.to_owned(),
            ..Shared::default()
        }));
        let router = Router::new()
            .route("/graphql", post(graphql))
            .with_state(shared.clone());
        Self {
            shared,
            serving: Loopback::bind().await.serve(router),
        }
    }

    /// The `api_url` a connector is given.
    pub(crate) fn api_url(&self) -> String {
        self.serving.host.clone()
    }

    /// Adds a team; its id.
    pub(crate) fn add_team(&self, key: &str, name: &str) -> String {
        let mut s = self.shared.lock().unwrap();
        let (id, at) = (s.id(), s.tick());
        s.teams.push(Team {
            id: id.clone(),
            key: key.to_owned(),
            name: name.to_owned(),
            private: false,
            created_at: at,
        });
        id
    }

    /// Adds a project (led by `lead`); its id.
    pub(crate) fn add_project(
        &self,
        name: &str,
        description: &str,
        content: &str,
        lead: &str,
    ) -> String {
        let mut s = self.shared.lock().unwrap();
        let (id, at) = (s.id(), s.tick());
        s.projects.push(Project {
            id: id.clone(),
            name: name.to_owned(),
            description: description.to_owned(),
            content: (!content.is_empty()).then(|| content.to_owned()),
            lead: Some(lead.to_owned()),
            created_at: at.clone(),
            updated_at: at,
        });
        id
    }

    /// Rewrites a project's content, which moves its `updatedAt`.
    pub(crate) fn edit_project(&self, id: &str, content: &str) {
        let mut s = self.shared.lock().unwrap();
        let at = s.tick();
        let project = s.projects.iter_mut().find(|p| p.id == id).unwrap();
        project.content = Some(content.to_owned());
        project.updated_at = at;
    }

    /// Opens an issue in the team with `key` (Todo, no priority, unassigned); its identifier.
    pub(crate) fn open_issue(
        &self,
        key: &str,
        title: &str,
        description: &str,
        creator: &str,
    ) -> String {
        let mut s = self.shared.lock().unwrap();
        let (id, at) = (s.id(), s.tick());
        let team = s.teams.iter().find(|t| t.key == key).unwrap().id.clone();
        let number = s.issues.iter().filter(|i| i.team == team).count() as u64 + 1;
        s.issues.push(Issue {
            id,
            team,
            number,
            title: title.to_owned(),
            description: (!description.is_empty()).then(|| description.to_owned()),
            state: ("Todo".to_owned(), "unstarted".to_owned()),
            priority: 0,
            labels: Vec::new(),
            assignee: None,
            creator: Some(creator.to_owned()),
            project: None,
            cycle: None,
            created_at: at.clone(),
            updated_at: at,
            archived_at: None,
            trashed: None,
        });
        format!("{key}-{number}")
    }

    /// Changes an issue as Linear's app would, which moves its `updatedAt`.
    pub(crate) fn edit(&self, identifier: &str, change: impl FnOnce(&mut IssueEdit)) {
        let mut s = self.shared.lock().unwrap();
        let at = s.tick();
        let projects: Vec<(String, String)> = s
            .projects
            .iter()
            .map(|p| (p.id.clone(), p.name.clone()))
            .collect();
        let issue = s.issue_mut(identifier);
        let mut edit = IssueEdit {
            title: issue.title.clone(),
            description: issue.description.clone().unwrap_or_default(),
            state: issue.state.clone(),
            priority: issue.priority,
            labels: issue.labels.clone(),
            assignee: issue.assignee.clone(),
            project: issue
                .project
                .as_ref()
                .and_then(|id| projects.iter().find(|p| &p.0 == id))
                .map(|p| p.1.clone()),
            cycle: issue.cycle,
        };
        change(&mut edit);
        issue.title = edit.title;
        issue.description = (!edit.description.is_empty()).then_some(edit.description);
        issue.state = edit.state;
        issue.priority = edit.priority;
        issue.labels = edit.labels;
        issue.assignee = edit.assignee;
        issue.project = edit.project.map(|name| {
            let project = projects.iter().find(|p| p.1 == name);
            project.expect("a project added first").0.clone()
        });
        issue.cycle = edit.cycle;
        issue.updated_at = at;
    }

    /// Comments on an issue (which leaves the issue's `updatedAt` as it is).
    pub(crate) fn comment(&self, identifier: &str, user: &str, body: &str) {
        let mut s = self.shared.lock().unwrap();
        let (id, at) = (s.id(), s.tick());
        let issue = s.issue_mut(identifier).id.clone();
        s.comments.push(Comment {
            id,
            issue,
            body: body.to_owned(),
            user: Some(user.to_owned()),
            created_at: at.clone(),
            updated_at: at,
        });
    }

    /// Archives an issue (`trashed`: deletes it, which Linear keeps in its trash a while).
    pub(crate) fn archive(&self, identifier: &str, trashed: bool) {
        let mut s = self.shared.lock().unwrap();
        let at = s.tick();
        let issue = s.issue_mut(identifier);
        issue.archived_at = Some(at.clone());
        issue.trashed = trashed.then_some(true);
        issue.updated_at = at;
    }

    pub(crate) fn set_rate_limited(&self, limited: bool) {
        self.shared.lock().unwrap().rate_limited = limited;
    }

    /// Every exchange so far, in order.
    pub(crate) fn exchanges(&self) -> Vec<Exchange> {
        self.shared.lock().unwrap().log.clone()
    }
}

/// What an edit may change of an issue.
pub(crate) struct IssueEdit {
    pub title: String,
    pub description: String,
    /// Name and type (`triage`, `backlog`, `unstarted`, `started`, `completed`, `canceled`).
    pub state: (String, String),
    /// 0 (none) to 4 (low).
    pub priority: u8,
    pub labels: Vec<String>,
    pub assignee: Option<String>,
    pub project: Option<String>,
    pub cycle: Option<u32>,
}

/// The schema read from the declarations is Linear's (its core types as the connector uses
/// them), every query the connector sends validates against it, and the fake's answers to
/// them and to errors conform; the check has teeth: a field Linear lacks, a wrong argument, a
/// variable of the wrong type, a null for a non-null field, an object for a list, an enum value
/// Linear lacks and an unselected field are each caught.
#[tokio::test]
async fn the_linear_fake_answers_only_what_linears_schema_allows() {
    let schema = schema();
    let issue = schema.get_object("Issue").expect("Issue");
    for (field, ty) in [
        ("identifier", "String!"),
        ("updatedAt", "DateTime!"),
        ("archivedAt", "DateTime"),
        ("comments", "CommentConnection!"),
    ] {
        assert_eq!(issue.fields[field].ty.to_string(), ty, "Issue.{field}");
    }
    let teams = &schema.get_object("Query").expect("Query").fields["teams"];
    assert!(teams.argument_by_name("after").is_some() && teams.argument_by_name("first").is_some());
    for query in engram_connectors::LinearProvider::queries() {
        validated(query).unwrap_or_else(|e| panic!("{query}\n{e}"));
    }

    let fake = LinearFake::start("lin_api_conformance", "oauth-token").await;
    fake.add_team("ENG", "Engineering");
    let project = fake.add_project("Reliability", "Fewer pages.", "## Goals", "Ana Lima");
    let first = fake.open_issue("ENG", "Deploys stall", "At 90%.", "Ana Lima");
    fake.open_issue("ENG", "Raise the retry budget", "", "Bo");
    fake.edit(&first, |e| {
        e.labels = vec!["bug".into()];
        e.assignee = Some("Cy".into());
        e.project = Some("Reliability".into());
        e.cycle = Some(3);
        e.priority = 2;
    });
    fake.comment(&first, "Bo", "The cache was cold.");
    let client = reqwest::Client::new();
    let url = format!("{}/graphql", fake.api_url());
    let call = |query: &str, variables: Value, authorization: &str| {
        let request = client
            .post(&url)
            .header("authorization", authorization)
            .json(&json!({"query": query, "variables": variables}));
        async move { request.send().await.unwrap().status().as_u16() }
    };
    let key = "lin_api_conformance";
    let [teams, issues, comments, one, more, newest, projects, overview] =
        engram_connectors::LinearProvider::queries()
    else {
        panic!("eight queries");
    };
    assert_eq!(call(teams, json!({"first": 1}), key).await, 200);
    assert_eq!(
        call(teams, json!({"first": 50}), "Bearer oauth-token").await,
        200
    );
    let filter =
        json!({"team": {"id": {"eq": "x"}}, "updatedAt": {"gt": "2026-03-01T00:00:00.000Z"}});
    assert_eq!(
        call(
            issues,
            json!({"filter": filter, "first": 1, "includeArchived": true}),
            key
        )
        .await,
        200
    );
    let filter = json!({"updatedAt": {"gt": "2026-03-01T00:00:00.000Z"}});
    assert_eq!(
        call(comments, json!({"filter": filter, "first": 50}), key).await,
        200
    );
    assert_eq!(call(one, json!({"id": first, "first": 50}), key).await, 200);
    assert_eq!(
        call(one, json!({"id": "nope", "first": 50}), key).await,
        200
    );
    assert_eq!(
        call(more, json!({"id": first, "first": 1, "after": null}), key).await,
        200
    );
    let filter = json!({"issue": {"team": {"id": {"eq": "x"}}}});
    assert_eq!(call(newest, json!({"filter": filter}), key).await, 200);
    let filter = json!({"project": {"id": {"eq": project}}});
    assert_eq!(
        call(
            issues,
            json!({"filter": filter, "first": 5, "includeArchived": false}),
            key
        )
        .await,
        200
    );
    assert_eq!(call(projects, json!({"first": 50}), key).await, 200);
    assert_eq!(call(overview, json!({ "id": project }), key).await, 200);
    assert_eq!(call(teams, json!({"first": 1}), "lin_api_wrong").await, 400);
    fake.set_rate_limited(true);
    assert_eq!(call(teams, json!({"first": 1}), key).await, 400);
    fake.set_rate_limited(false);
    let exchanges = fake.exchanges();
    assert_conforms(&exchanges);
    let listed = exchanges
        .iter()
        .find(|e| e.operation == "EngramIssues")
        .unwrap();
    assert!(listed.answer["data"]["issues"]["nodes"]
        .as_array()
        .unwrap()
        .is_empty());

    // The check has teeth.
    let answered = |operation: &str| {
        exchanges
            .iter()
            .find(|e| e.operation == operation && e.status == 200)
            .unwrap()
            .clone()
    };
    let mut strays = Vec::new();
    let mut stray = answered("EngramTeams");
    stray.query = stray.query.replace("private", "secret");
    strays.push(stray);
    let mut stray = answered("EngramTeams");
    stray.query = stray.query.replace("first: $first", "top: $first");
    strays.push(stray);
    let mut stray = answered("EngramTeams");
    stray.variables = json!({"first": "fifty"});
    strays.push(stray);
    let mut stray = answered("EngramIssue");
    stray.answer["data"]["issue"]["identifier"] = Value::Null;
    strays.push(stray);
    let mut stray = answered("EngramIssue");
    stray.answer["data"]["issue"]["comments"]["nodes"] = json!({"id": "x"});
    strays.push(stray);
    let mut stray = answered("EngramIssue");
    stray.answer["data"]["issue"]["updatedAt"] = json!("yesterday");
    strays.push(stray);
    let mut stray = answered("EngramIssue");
    stray.answer["data"]["issue"]["estimate"] = json!(3);
    strays.push(stray);
    let mut stray = answered("EngramIssue");
    stray.answer["data"]["issue"]["comments"]["pageInfo"]
        .as_object_mut()
        .unwrap()
        .remove("hasNextPage");
    strays.push(stray);
    let mut stray = answered("EngramIssues");
    stray.variables["includeArchived"] = Value::Null;
    strays.push(stray);
    for stray in strays {
        assert!(!problems_of(&stray).is_empty(), "{stray:#?} passed");
    }
    let enum_stray = "query { issues(orderBy: relevance) { nodes { id } } }";
    assert!(validated(enum_stray).is_err());
}
