//! A stateful fake of the part of Linear's GraphQL API (`POST /graphql`) the linear connector
//! reads: teams, projects (their overviews), issues (states, labels, people, projects, cycles;
//! edits move `updatedAt`, archiving and trashing), comments, the `issues`/`comments` filters on
//! team, project and `updatedAt`,
//! connections paged with `first`/`after`/`pageInfo`, a personal API key (`Authorization: <key>`)
//! and an OAuth token (`Bearer`), and rate limiting (`RATELIMITED` with Linear's headers).
//!
//! The fake parses each request's document (`graphql-parser`) and answers by walking its
//! selection set (aliases, arguments, variables, fragments); what it cannot answer it refuses as
//! Linear refuses an invalid document (`GRAPHQL_VALIDATION_FAILED`).
//!
//! It is a test double of Linear, so it is held to Linear's own schema, through GraphQL's
//! reference implementation (graphql-js, the `graphql` npm package `make setup-test` installs,
//! run by `node` on `linear_check.mjs`): [`assert_conforms`] checks every exchange in one run,
//! each document validated with all of the specification's rules, its variables coerced to
//! their declared types, and each answer executed back through the selection's types (every
//! selected field present, no other, nullability, lists, scalars and enum values; a valid
//! request the fake refused is caught too). Linear ships no `schema.graphql` on npm, but its SDK
//! `@linear/sdk` is generated from the schema, and the type declarations it ships hold the whole
//! of it; `make setup-test` installs them and [`sdl_from_declarations`] reads the schema back
//! from them.
#![allow(clippy::unwrap_used)] // test code

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use graphql_parser::query as gql;
use serde_json::{json, Map, Value};

use crate::serve::{clock_time, Loopback, Serving};

/// When a rate limit the fake imposes resets (epoch milliseconds).
pub const RATE_RESET_MS: i64 = 1_893_456_000_000;

/// One request and its answer, as the fake saw them.
#[derive(Debug, Clone)]
pub struct Exchange {
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
    /// The authorization server whose active access tokens are accepted too.
    introspection: Option<crate::serve::Introspection>,
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
    log: crate::serve::Log<Exchange>,
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

/// Linear's schema as SDL, read once from `@linear/sdk`'s declarations (`make setup-test`
/// installs them).
pub fn schema_sdl() -> &'static str {
    static SDL: OnceLock<String> = OnceLock::new();
    SDL.get_or_init(|| {
        let path = crate::cache_dir().join("linear-schema/sdk.d.mts");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "Linear's GraphQL schema types {} cannot be read ({e}): run `make setup-test`",
                path.display()
            )
        });
        sdl_from_declarations(&text).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// Where `make setup-test` puts graphql-js (the `graphql` npm package).
fn graphql_js() -> PathBuf {
    let dir = crate::cache_dir().join("graphql-js");
    assert!(
        dir.join("index.mjs").is_file(),
        "GraphQL's reference implementation (the graphql npm package) is not in {}: run `make \
         setup-test`",
        dir.display()
    );
    dir
}

/// Linear's schema as SDL, read from `@linear/sdk`'s type declarations (graphql-codegen's
/// `typescript` output of the schema): each object type (`__typename`), interface (what object
/// types are `&`-joined with), input object, `<Type><Field>Args` argument list, enum (its string
/// values), union and custom scalar, with every list and nullability (`Maybe`/`InputMaybe`).
/// Descriptions, default values and directives are not carried (validation needs none of them).
pub fn sdl_from_declarations(text: &str) -> Result<String, String> {
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

/// What does not fit Linear's schema in each of `items` (`{"query", "variables", "answer"}`;
/// without an answer, only the document and its variables), in order: one `node` run of
/// `linear_check.mjs` on graphql-js for them all.
fn checked(items: Vec<Value>) -> Vec<Vec<String>> {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let count = items.len();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/src/linear_check.mjs");
    let mut child = Command::new("node")
        .arg(script)
        .arg(graphql_js())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs (Node.js is needed by the Linear checks)");
    let input = serde_json::to_vec(&json!({"sdl": schema_sdl(), "exchanges": items})).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Written beside the reading, so that neither pipe fills up and stalls the other.
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "linear_check.mjs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    writer.join().unwrap().unwrap();
    let problems: Vec<Vec<String>> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(problems.len(), count, "one list of problems per item");
    problems
}

/// What does not fit Linear's schema in each document (validated with every rule).
pub fn document_problems(queries: &[&str]) -> Vec<Vec<String>> {
    checked(queries.iter().map(|q| json!({ "query": q })).collect())
}

/// What does not fit Linear's schema in each exchange: the document, its variables, and the
/// answer (`data` against the selection's types; `errors` in GraphQL's shape; no valid request
/// refused as invalid).
pub fn problems_of(exchanges: &[Exchange]) -> Vec<Vec<String>> {
    checked(
        exchanges
            .iter()
            .map(|e| json!({"query": e.query, "variables": e.variables, "answer": e.answer}))
            .collect(),
    )
}

/// Checks every exchange against Linear's schema; panics with every problem found.
pub fn assert_conforms(exchanges: &[Exchange]) {
    let problems: Vec<String> = exchanges
        .iter()
        .zip(problems_of(exchanges))
        .flat_map(|(e, found)| {
            let at = format!("{} -> {}", e.operation, e.status);
            found.into_iter().map(move |p| format!("{at}: {p}"))
        })
        .collect();
    assert!(
        problems.is_empty(),
        "the exchanges stray from Linear's schema:\n{}",
        problems.join("\n")
    );
}

type Document<'a> = gql::Document<'a, String>;
type SelectionSet<'a> = gql::SelectionSet<'a, String>;
type Field<'a> = gql::Field<'a, String>;

/// The selection set of the document's one operation (a query) and the request's variables,
/// the declared defaults put in.
fn operation<'d, 'a>(
    document: &'d Document<'a>,
    variables: &Value,
) -> Result<(&'d SelectionSet<'a>, Value), String> {
    let mut operations = document.definitions.iter().filter_map(|d| match d {
        gql::Definition::Operation(o) => Some(o),
        gql::Definition::Fragment(_) => None,
    });
    let (Some(operation), None) = (operations.next(), operations.next()) else {
        return Err("the fake answers documents of one operation".to_owned());
    };
    let (set, definitions) = match operation {
        gql::OperationDefinition::SelectionSet(set) => (set, &[][..]),
        gql::OperationDefinition::Query(q) if q.directives.is_empty() => {
            (&q.selection_set, &q.variable_definitions[..])
        }
        gql::OperationDefinition::Query(_)
        | gql::OperationDefinition::Mutation(_)
        | gql::OperationDefinition::Subscription(_) => {
            return Err("the fake answers queries without directives only".to_owned())
        }
    };
    let mut values = variables.as_object().cloned().unwrap_or_default();
    for definition in definitions {
        if let Some(default) = &definition.default_value {
            if !values.contains_key(&definition.name) {
                values.insert(definition.name.clone(), json_of(default, &Value::Null));
            }
        }
    }
    Ok((set, Value::Object(values)))
}

/// The fields of a selection set, fragments spread.
fn fields<'d, 'a>(
    document: &'d Document<'a>,
    set: &'d SelectionSet<'a>,
    depth: usize,
) -> Result<Vec<&'d Field<'a>>, String> {
    if depth > 16 {
        return Err("fragments spread in one another too deep".to_owned());
    }
    let mut out = Vec::new();
    for selection in &set.items {
        let directives = match selection {
            gql::Selection::Field(field) => &field.directives,
            gql::Selection::FragmentSpread(spread) => &spread.directives,
            gql::Selection::InlineFragment(inline) => &inline.directives,
        };
        if !directives.is_empty() {
            return Err("the fake does not serve directives".to_owned());
        }
        match selection {
            gql::Selection::Field(field) => out.push(field),
            gql::Selection::FragmentSpread(spread) => {
                let fragment = document
                    .definitions
                    .iter()
                    .find_map(|d| match d {
                        gql::Definition::Fragment(f) if f.name == spread.fragment_name => Some(f),
                        gql::Definition::Fragment(_) | gql::Definition::Operation(_) => None,
                    })
                    .ok_or_else(|| format!("no fragment `{}`", spread.fragment_name))?;
                out.extend(fields(document, &fragment.selection_set, depth + 1)?);
            }
            gql::Selection::InlineFragment(inline) => {
                out.extend(fields(document, &inline.selection_set, depth + 1)?)
            }
        }
    }
    Ok(out)
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

/// A GraphQL value as JSON, the request's variables put in.
fn json_of(value: &gql::Value<'_, String>, variables: &Value) -> Value {
    use gql::Value as V;
    match value {
        V::Null => Value::Null,
        V::Enum(name) => Value::from(name.as_str()),
        V::Variable(name) => variables.get(name).cloned().unwrap_or(Value::Null),
        V::String(s) => Value::from(s.as_str()),
        V::Float(f) => json!(f),
        V::Int(i) => json!(i.as_i64()),
        V::Boolean(b) => Value::from(*b),
        V::List(items) => Value::Array(items.iter().map(|v| json_of(v, variables)).collect()),
        V::Object(members) => Value::Object(
            members
                .iter()
                .map(|(k, v)| (k.clone(), json_of(v, variables)))
                .collect(),
        ),
    }
}

/// An argument's value with the request's variables put in.
fn argument(field: &Field<'_>, name: &str, variables: &Value) -> Value {
    field
        .arguments
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| json_of(v, variables))
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

    fn resolve(&self, obj: &Obj, field: &Field<'_>, variables: &Value) -> Result<Resolved, String> {
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

    /// The answer to the selection sets of one field (or the operation's) on `obj`: their
    /// fields by response key, those of one key merged.
    fn select<'a>(
        &self,
        document: &Document<'a>,
        obj: &Obj,
        sets: &[&SelectionSet<'a>],
        variables: &Value,
    ) -> Result<Value, String> {
        let mut keyed: Vec<(&str, Vec<&Field<'a>>)> = Vec::new();
        for set in sets {
            for field in fields(document, set, 0)? {
                let key = field.alias.as_deref().unwrap_or(&field.name);
                match keyed.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, same)) => same.push(field),
                    None => keyed.push((key, vec![field])),
                }
            }
        }
        let mut out = Map::new();
        for (key, same) in keyed {
            let sets: Vec<&SelectionSet<'a>> = same.iter().map(|f| &f.selection_set).collect();
            let value = match self.resolve(obj, same[0], variables)? {
                Resolved::Leaf(v) => v,
                Resolved::Object(o) => self.select(document, &o, &sets, variables)?,
                Resolved::List(items) => Value::Array(
                    items
                        .iter()
                        .map(|o| self.select(document, o, &sets, variables))
                        .collect::<Result<_, _>>()?,
                ),
            };
            out.insert(key.to_owned(), value);
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
    // What the fake cannot answer (a document that does not parse, a field or argument it does
    // not serve) it refuses as Linear refuses an invalid document; `assert_conforms` then
    // tells whether the document was Linear's to refuse.
    let refused = |e: &str| {
        (
            StatusCode::BAD_REQUEST,
            Vec::new(),
            error_answer("GRAPHQL_VALIDATION_FAILED", "graphql error", e),
        )
    };
    let document = match gql::parse_query::<String>(query) {
        Ok(document) => document,
        Err(e) => return refused(&e.to_string()),
    };
    let answered = operation(&document, &variables)
        .and_then(|(set, variables)| shared.select(&document, &Obj::Query, &[set], &variables));
    match answered {
        Ok(data) => (StatusCode::OK, Vec::new(), json!({ "data": data })),
        Err(e) if e.starts_with("Entity not found") => (
            StatusCode::OK,
            Vec::new(),
            json!({"data": null, "errors": error_answer("INVALID_INPUT", "invalid input", &e)["errors"]}),
        ),
        Err(e) => refused(&format!("the linear fake cannot answer: {e}")),
    }
}

async fn graphql(
    State(shared): State<SharedState>,
    mut headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (introspection, own) = {
        let s = shared.lock().unwrap();
        (s.introspection.clone(), s.token.clone())
    };
    crate::serve::vouch(&mut headers, introspection, &own).await;
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
pub struct LinearFake {
    shared: SharedState,
    serving: Serving,
}

impl LinearFake {
    /// Starts the fake; `key` is the personal API key and `token` the OAuth token it accepts.
    pub async fn start(key: &str, token: &str) -> Self {
        // Read before serving: a missing schema or graphql-js fails here, saying what to run.
        schema_sdl();
        graphql_js();
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
    pub fn api_url(&self) -> String {
        self.serving.host.clone()
    }

    /// Adds a team; its id.
    pub fn add_team(&self, key: &str, name: &str) -> String {
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
    pub fn add_project(&self, name: &str, description: &str, content: &str, lead: &str) -> String {
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
    pub fn edit_project(&self, id: &str, content: &str) {
        let mut s = self.shared.lock().unwrap();
        let at = s.tick();
        let project = s.projects.iter_mut().find(|p| p.id == id).unwrap();
        project.content = Some(content.to_owned());
        project.updated_at = at;
    }

    /// Opens an issue in the team with `key` (Todo, no priority, unassigned); its identifier.
    pub fn open_issue(&self, key: &str, title: &str, description: &str, creator: &str) -> String {
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
    pub fn edit(&self, identifier: &str, change: impl FnOnce(&mut IssueEdit)) {
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
    pub fn comment(&self, identifier: &str, user: &str, body: &str) {
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
    pub fn archive(&self, identifier: &str, trashed: bool) {
        let mut s = self.shared.lock().unwrap();
        let at = s.tick();
        let issue = s.issue_mut(identifier);
        issue.archived_at = Some(at.clone());
        issue.trashed = trashed.then_some(true);
        issue.updated_at = at;
    }

    pub fn set_rate_limited(&self, limited: bool) {
        self.shared.lock().unwrap().rate_limited = limited;
    }

    /// Accepts, besides its own tokens, the access tokens the authorization server whose
    /// introspection endpoint is `endpoint` holds active (checked with `client_id`, `secret`).
    pub fn accept_introspected(&self, endpoint: &str, client_id: &str, secret: &str) {
        let introspection = crate::serve::Introspection::new(endpoint, client_id, secret);
        self.shared.lock().unwrap().introspection = Some(introspection);
    }

    /// Logs every exchange (the default) or none: a benchmark's fake turns its log off.
    pub fn set_logging(&self, on: bool) {
        self.shared.lock().unwrap().log.set_on(on);
    }

    /// Every exchange so far, in order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.shared.lock().unwrap().log.all()
    }
}

/// What an edit may change of an issue.
pub struct IssueEdit {
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

/// The type of `field` of the object type `ty` in the SDL, with its arguments (`(…): Type`).
#[cfg(test)]
fn sdl_field<'s>(sdl: &'s str, ty: &str, field: &str) -> Option<&'s str> {
    let mut lines = sdl
        .lines()
        .skip_while(|l| !l.starts_with(&format!("type {ty} ")));
    lines.next()?;
    lines
        .take_while(|l| *l != "}")
        .find_map(|l| l.trim().strip_prefix(field))
        .filter(|rest| rest.starts_with([':', '(']))
}

/// The schema read from the declarations is Linear's (its core types as the connector uses
/// them), every query the connector sends validates against it, and the fake's answers to
/// them and to errors conform; the check has teeth: a field Linear lacks, a wrong argument, a
/// variable of the wrong type, a null for a non-null field, an object for a list, a wrong
/// scalar, an enum value Linear lacks, an unselected field, a missing one, an alias answered
/// under the field's name, malformed errors and a valid request refused are each caught.
#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_linear_fake_answers_only_what_linears_schema_allows() {
        let sdl = schema_sdl();
        for (field, ty) in [
            ("identifier", ": String!"),
            ("updatedAt", ": DateTime!"),
            ("archivedAt", ": DateTime"),
            ("comments", "): CommentConnection!"),
        ] {
            let found = sdl_field(sdl, "Issue", field).unwrap_or_default();
            assert!(found.ends_with(ty), "Issue.{field}{found}");
        }
        let teams = sdl_field(sdl, "Query", "teams").unwrap_or_default();
        assert!(
            teams.contains("after: String") && teams.contains("first: Int"),
            "Query.teams{teams}"
        );
        let enum_stray = "query { issues(orderBy: relevance) { nodes { id } } }";
        let mut documents = engram_connectors::LinearProvider::queries().to_vec();
        documents.push(enum_stray);
        let found = document_problems(&documents);
        for (query, problems) in documents.iter().zip(&found) {
            let caught = problems
                .iter()
                .any(|p| p.contains("Value \"relevance\" does not exist in \"PaginationOrderBy\""));
            if *query == enum_stray {
                assert!(caught, "{query}: {problems:?}");
            } else {
                assert!(problems.is_empty(), "{query}: {problems:?}");
            }
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
        strays.push(("Cannot query field \"secret\"", stray));
        let mut stray = answered("EngramTeams");
        stray.query = stray.query.replace("first: $first", "top: $first");
        strays.push(("Unknown argument \"top\"", stray));
        let mut stray = answered("EngramTeams");
        stray.variables = json!({"first": "fifty"});
        strays.push(("Int cannot represent non-integer value: \"fifty\"", stray));
        let mut stray = answered("EngramIssue");
        stray.answer["data"]["issue"]["identifier"] = Value::Null;
        strays.push((
            "Cannot return null for non-nullable field Issue.identifier",
            stray,
        ));
        let mut stray = answered("EngramIssue");
        stray.answer["data"]["issue"]["identifier"] = json!(1);
        strays.push(("data.issue.identifier: 1 is served as \"1\"", stray));
        let mut stray = answered("EngramIssue");
        stray.answer["data"]["issue"]["comments"]["nodes"] = json!({"id": "x"});
        strays.push(("Expected Iterable", stray));
        let mut stray = answered("EngramIssue");
        stray.answer["data"]["issue"]["updatedAt"] = json!("yesterday");
        strays.push(("\"yesterday\" is not a DateTime", stray));
        let mut stray = answered("EngramIssue");
        stray.answer["data"]["issue"]["estimate"] = json!(3);
        strays.push(("data.issue.estimate: answered but not selected", stray));
        let mut stray = answered("EngramIssue");
        stray.answer["data"]["issue"]["comments"]["pageInfo"]
            .as_object_mut()
            .unwrap()
            .remove("hasNextPage");
        strays.push(("`hasNextPage` is selected but missing", stray));
        let mut stray = answered("EngramIssues");
        stray.variables["includeArchived"] = Value::Null;
        strays.push(("of non-null type \"Boolean!\" must not be null", stray));
        let mut stray = answered("EngramProject");
        stray.answer["data"]["project"]["status"]["type"] = json!("stalled");
        strays.push(("cannot represent value: \"stalled\"", stray));
        let mut stray = answered("EngramNewestComment");
        let head = stray.answer["data"]["head"].take();
        stray.answer["data"] = json!({"comments": head, "tail": stray.answer["data"]["tail"]});
        strays.push(("`head` is selected but missing", stray));
        let mut stray = answered("EngramTeams");
        stray.answer = json!({"errors": [{"message": 1}]});
        strays.push(("malformed errors", stray));
        let mut stray = answered("EngramTeams");
        stray.status = 400;
        stray.answer = error_answer("GRAPHQL_VALIDATION_FAILED", "graphql error", "no");
        strays.push(("a valid request refused", stray));
        let (expected, strays): (Vec<&str>, Vec<Exchange>) = strays.into_iter().unzip();
        for ((stray, problems), expected) in strays.iter().zip(problems_of(&strays)).zip(expected) {
            assert!(
                problems.iter().any(|p| p.contains(expected)),
                "{stray:#?}: {problems:?} does not say {expected}"
            );
        }
    }
}
