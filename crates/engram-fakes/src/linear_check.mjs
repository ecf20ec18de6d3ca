// Holds the linear fake's exchanges to Linear's schema through GraphQL's reference
// implementation (graphql-js, the `graphql` npm package `make setup-test` installs), for
// `linear_fake.rs`'s `problems_of`.
//
// `node linear_check.mjs <graphql package directory>` reads `{"sdl": "...", "exchanges":
// [{"query", "variables", "answer"}, ...]}` on stdin (a document alone: `{"query"}`) and writes,
// for each exchange in order, the list of what does not fit (empty when it conforms) as one JSON
// array on stdout:
// - the document parses and passes `validate` with every rule of the specification;
// - its variables coerce to the types its operation declares (`getVariableValues`);
// - the answer is `data`, `errors` and `extensions` only, its errors in GraphQL's shape (a message
//   and Linear's `extensions.code` each), and a request refused as invalid (Linear's
//   `GRAPHQL_VALIDATION_FAILED`, `BAD_USER_INPUT`) is one the checks above refuse too;
// - `data` is what executing the document would complete from it: the document is executed
//   against the schema with `data` as the root value, each field read from its parent's answer by
//   its response key (so aliases count) and each abstract value typed by its `__typename` (or
//   the abstract type's only possible type). Execution must raise no error (a null for a non-null
//   field, a list that is not one, a scalar or enum value the type refuses, a selected field the
//   answer lacks) and the completed result must equal `data` (nothing answered that was not
//   selected, no value the type would serialize differently).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const graphqlDir = process.argv[2];
const {
  GraphQLError,
  buildSchema,
  executeSync,
  getOperationAST,
  getVariableValues,
  parse,
  validate,
  validateSchema,
} = await import(pathToFileURL(join(graphqlDir, "index.mjs")).href);

const input = JSON.parse(readFileSync(0, "utf8"));
const schema = buildSchema(input.sdl);
const schemaErrors = validateSchema(schema);
if (schemaErrors.length > 0) {
  const said = schemaErrors.map((e) => e.message).join("; ");
  process.stderr.write(`Linear's schema does not validate: ${said}\n`);
  process.exit(1);
}

// In answers, Linear's date-time scalar is an RFC 3339 date-time and its date one a calendar
// date. (As input both also take shortcuts such as `2021` and ISO 8601 durations, so arguments
// and variables are left to Linear; so are the other custom scalars, JSON and friends.)
const RFC3339 =
  /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$/;
const DATE = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/;
const scalars = {
  DateTime: (v) => typeof v === "string" && RFC3339.test(v) && !Number.isNaN(Date.parse(v)),
  TimelessDate: (v) => typeof v === "string" && DATE.test(v),
};
for (const [name, fits] of Object.entries(scalars)) {
  const type = schema.getType(name);
  if (!type) throw new Error(`Linear's schema has no scalar ${name}`);
  type.serialize = (value) => {
    if (!fits(value)) throw new GraphQLError(`${JSON.stringify(value)} is not a ${name}`);
    return value;
  };
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

// Each field is read from its parent's answer by its response key.
function fieldResolver(source, _args, _context, info) {
  const key = info.path.key;
  if (!isObject(source)) {
    throw new GraphQLError(`${JSON.stringify(source)} is not an object for ${info.parentType}`);
  }
  if (!Object.hasOwn(source, key)) {
    throw new GraphQLError(`\`${key}\` is selected but missing`);
  }
  return source[key];
}

// An abstract value is typed by its `__typename`, or by the abstract type's only possible type.
function typeResolver(value, _context, _info, abstractType) {
  if (isObject(value) && typeof value.__typename === "string") return value.__typename;
  const possible = schema.getPossibleTypes(abstractType);
  if (possible.length === 1) return possible[0].name;
  throw new GraphQLError(`a ${abstractType} without \`__typename\`: select it to tell the type`);
}

// Where `got` (the completed result) and `want` (the answer) differ, as paths.
function differences(got, want, at, out) {
  if (Array.isArray(got) && Array.isArray(want)) {
    if (got.length !== want.length) {
      out.push(`${at}: ${want.length} items, ${got.length} completed`);
    }
    for (let i = 0; i < Math.min(got.length, want.length); i++) {
      differences(got[i], want[i], `${at}[${i}]`, out);
    }
  } else if (isObject(got) && isObject(want)) {
    for (const key of Object.keys(want)) {
      if (!Object.hasOwn(got, key)) out.push(`${at}.${key}: answered but not selected`);
      else differences(got[key], want[key], `${at}.${key}`, out);
    }
    for (const key of Object.keys(got)) {
      if (!Object.hasOwn(want, key)) out.push(`${at}.${key}: selected but missing`);
    }
  } else if (got !== want) {
    out.push(`${at}: ${JSON.stringify(want)} is served as ${JSON.stringify(got)}`);
  }
}

function problemsOf({ query, variables, answer }) {
  const problems = [];
  let document;
  try {
    document = parse(query);
  } catch (e) {
    return [`the document does not parse: ${e.message}`];
  }
  const invalid = validate(schema, document);
  if (invalid.length > 0) {
    return [`the document is not valid: ${invalid.map((e) => e.message).join("; ")}`];
  }
  const operation = getOperationAST(document, null);
  if (!operation) return ["the document has no single operation"];
  if (variables === undefined && answer === undefined) return problems; // the document alone
  const values = variables ?? {};
  const coerced = isObject(values)
    ? getVariableValues(schema, operation.variableDefinitions ?? [], values)
    : { errors: [{ message: "the variables are not an object" }] };
  if (coerced.errors) {
    problems.push(`the variables do not fit: ${coerced.errors.map((e) => e.message).join("; ")}`);
  }
  if (!isObject(answer)) return [...problems, "the answer is not an object"];
  for (const key of Object.keys(answer)) {
    if (!["data", "errors", "extensions"].includes(key)) {
      problems.push(`\`${key}\` in a GraphQL answer`);
    }
  }
  if (Object.hasOwn(answer, "errors")) {
    const errors = answer.errors;
    const wellFormed =
      Array.isArray(errors) &&
      errors.length > 0 &&
      errors.every(
        (e) =>
          isObject(e) &&
          typeof e.message === "string" &&
          typeof e.extensions?.code === "string",
      );
    if (!wellFormed) {
      problems.push(`malformed errors ${JSON.stringify(errors)}`);
    } else if (!coerced.errors) {
      for (const e of errors) {
        if (["GRAPHQL_VALIDATION_FAILED", "BAD_USER_INPUT"].includes(e.extensions.code)) {
          problems.push(`a valid request refused (${e.extensions.code}): ${e.message}`);
        }
      }
    }
  }
  const data = answer.data;
  if (data === undefined && !Object.hasOwn(answer, "errors")) {
    problems.push("neither data nor errors");
  }
  if (data === undefined || (data === null && Object.hasOwn(answer, "errors"))) return problems;
  if (coerced.errors) return problems; // execution would stop at the variables
  const result = executeSync({
    schema,
    document,
    rootValue: data,
    variableValues: values,
    fieldResolver,
    typeResolver,
  });
  for (const e of result.errors ?? []) {
    const at = e.path ? `data.${e.path.join(".")}` : "data";
    problems.push(`${at}: ${e.message}`);
  }
  if (!result.errors) {
    const completed = JSON.parse(JSON.stringify(result.data ?? null));
    differences(completed, data, "data", problems);
  }
  return problems;
}

process.stdout.write(JSON.stringify(input.exchanges.map(problemsOf)));
