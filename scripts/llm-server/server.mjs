// A local OpenAI-compatible chat-completions endpoint on a real model: llama.cpp through
// node-llama-cpp's prebuilt CPU binaries, with `response_format` JSON schemas enforced by
// llama.cpp's grammar sampling. The LLM graph extractor's tests run engram against it.
//
//   node server.mjs MODEL.gguf [PORT (0: any free one)] [THREADS]
//
// It listens on 127.0.0.1 only and prints `listening on http://127.0.0.1:PORT` to stderr once
// the model is loaded. Routes: POST /v1/chat/completions (one request at a time, in arrival
// order; `stream: true` answers in server-sent events, a delta per piece of text, then
// `data: [DONE]`), GET /v1/models, GET /health, GET /stats (completions served, by response
// format).
import http from "node:http";
import path from "node:path";
import {getLlama, LlamaChatSession} from "node-llama-cpp";

const modelPath = path.resolve(process.argv[2] ?? "");
const port = Number(process.argv[3] ?? 0);
const threads = Number(process.argv[4] ?? 2);
const modelId = path.basename(modelPath);
const MAX_BODY = 1 << 20;

const llama = await getLlama({gpu: false, build: "never", logLevel: "warn"});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: 4096, sequences: 1, threads});
const stats = {completions: 0, json_schema: 0, failed: 0};

/** The request's messages as a chat history: a system prompt, then user and model turns. */
function history(messages) {
    const turns = [];
    for (const m of messages) {
        const text = typeof m.content === "string"
            ? m.content
            : (m.content ?? []).map(part => part.text ?? "").join("");
        if (m.role === "system") turns.push({type: "system", text});
        else if (m.role === "user") turns.push({type: "user", text});
        else if (m.role === "assistant") turns.push({type: "model", response: [text]});
        else throw new Error(`unknown role ${m.role}`);
    }
    const last = turns.pop();
    if (last?.type !== "user") throw new Error("the last message must be the user's");
    return {turns, last: last.text};
}

async function grammarFor(format) {
    if (format?.type === "json_schema") {
        if (!format.json_schema?.schema) throw new Error("json_schema needs a schema");
        stats.json_schema += 1;
        return llama.createGrammarForJsonSchema(format.json_schema.schema);
    }
    if (format?.type === "json_object") return llama.getGrammarFor("json");
    return undefined;
}

async function complete(body, onTextChunk) {
    const {turns, last} = history(body.messages ?? []);
    const grammar = await grammarFor(body.response_format);
    const sequence = context.getSequence();
    try {
        const session = new LlamaChatSession({contextSequence: sequence});
        session.setChatHistory(turns);
        const text = await session.prompt(last, {
            grammar,
            maxTokens: body.max_completion_tokens ?? body.max_tokens ?? 768,
            temperature: body.temperature ?? 0,
            seed: body.seed ?? 0,
            onTextChunk,
        });
        session.dispose({disposeSequence: false});
        return text;
    } finally {
        sequence.dispose();
    }
}

let queue = Promise.resolve();

const server = http.createServer(async (req, res) => {
    const send = (status, value) => {
        res.writeHead(status, {"content-type": "application/json"});
        res.end(JSON.stringify(value));
    };
    if (req.method === "GET" && req.url === "/health") return send(200, {status: "ok"});
    if (req.method === "GET" && req.url === "/stats") return send(200, stats);
    if (req.method === "GET" && req.url === "/v1/models") {
        return send(200, {object: "list", data: [{id: modelId, object: "model", owned_by: "local"}]});
    }
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
        return send(404, {error: {message: "not found"}});
    }
    let raw = "";
    for await (const chunk of req) {
        raw += chunk;
        if (raw.length > MAX_BODY) return send(413, {error: {message: "request too large"}});
    }
    let body;
    try {
        body = JSON.parse(raw);
    } catch {
        return send(400, {error: {message: "the body is not JSON"}});
    }
    if (body.stream === true) {
        const id = `chatcmpl-s${stats.completions + 1}`;
        const event = (delta, finish) => JSON.stringify({
            id, object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000), model: modelId,
            choices: [{index: 0, delta, finish_reason: finish}],
        });
        let started = false;
        const start = () => {
            if (!started) {
                started = true;
                res.writeHead(200, {"content-type": "text/event-stream", "cache-control": "no-cache"});
                res.write(`data: ${event({role: "assistant", content: ""}, null)}\n\n`);
            }
        };
        const run = queue.then(() => complete(body, chunk => {
            start();
            res.write(`data: ${event({content: chunk}, null)}\n\n`);
        }));
        queue = run.catch(() => {});
        try {
            await run;
            stats.completions += 1;
            start();
            res.write(`data: ${event({}, "stop")}\n\n`);
            res.end("data: [DONE]\n\n");
        } catch (error) {
            stats.failed += 1;
            if (started) res.end(`data: ${JSON.stringify({error: {message: String(error?.message ?? error)}})}\n\n`);
            else send(400, {error: {message: String(error?.message ?? error)}});
        }
        return;
    }
    const run = queue.then(() => complete(body));
    queue = run.catch(() => {});
    try {
        const text = await run;
        stats.completions += 1;
        send(200, {
            id: `chatcmpl-${stats.completions}`,
            object: "chat.completion",
            created: Math.floor(Date.now() / 1000),
            model: modelId,
            choices: [{index: 0, message: {role: "assistant", content: text}, finish_reason: "stop"}],
        });
    } catch (error) {
        stats.failed += 1;
        send(400, {error: {message: String(error?.message ?? error)}});
    }
});
server.listen(port, "127.0.0.1", () => {
    console.error(`listening on http://127.0.0.1:${server.address().port}`);
});
