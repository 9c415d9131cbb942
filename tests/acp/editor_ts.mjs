// An ACP editor on the official TypeScript SDK (@agentclientprotocol/sdk), driven by the tests.
//
// Usage: node editor_ts.mjs SDK_DIR AGENT_COMMAND [ARGS...]
// Spawns the agent, connects to it with the SDK's client, then reads one JSON command per line
// on stdin and answers each with one JSON line on stdout (see tests/acp/editors.py):
//   {op:"request", method, params}          -> {result} | {error}
//   {op:"prompt", params, answers, cancelAfterChunks, cancelAtOnce, cancelFirst}
//                                           -> {result|error, permissions}
//   {op:"updates"}                          -> {updates}: received since the last call
//   {op:"audit"}                            -> {sent, received}: every session/update the agent
//                                              wrote (read off its stdout) and every one the SDK
//                                              handed to the client, as JSON
//   {op:"pid"}                              -> {pid} of the agent
// A permission answer "hold" never answers: the driver then prints {event:"held", request};
// "error" answers the request with an error.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { Writable } from "node:stream";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, command, ...args] = process.argv.slice(2);
const acp = await import(
  pathToFileURL(path.join(sdkDir, "node_modules", "@agentclientprotocol", "sdk", "dist", "v1", "stable", "acp.js")).href
);

const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const sent = [];
const received = [];
let pending = [];
let answers = [];
let permissions = [];
let chunkWatch = null;

let carry = "";
const decoder = new TextDecoder();
const agentOutput = new ReadableStream({
  start(controller) {
    child.stdout.on("data", (data) => {
      carry += decoder.decode(data, { stream: true });
      let index;
      while ((index = carry.indexOf("\n")) >= 0) {
        const line = carry.slice(0, index);
        carry = carry.slice(index + 1);
        if (!line.trim()) continue;
        const message = JSON.parse(line);
        if (message.method === "session/update") sent.push(message.params);
      }
      controller.enqueue(new Uint8Array(data));
    });
    child.stdout.on("end", () => controller.close());
  },
});
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), agentOutput);

function out(value) {
  process.stdout.write(JSON.stringify(value) + "\n");
}

const connection = acp
  .client({ name: "robota-test-ts" })
  .onNotification("session/update", async (ctx) => {
    const params = JSON.parse(JSON.stringify(ctx.params));
    received.push(params);
    pending.push(params);
    if (chunkWatch && params.update.sessionUpdate === "agent_message_chunk") chunkWatch();
  })
  .onRequest("session/request_permission", async (ctx) => {
    const request = JSON.parse(JSON.stringify(ctx.params));
    permissions.push(request);
    const answer = answers.shift() ?? "reject_once";
    if (answer === "hold") {
      out({ event: "held", request });
      return await new Promise(() => {});
    }
    if (answer === "error") throw new Error("this editor cannot show the question");
    if (answer === "cancelled") return { outcome: { outcome: "cancelled" } };
    return { outcome: { outcome: "selected", optionId: answer } };
  })
  .connect(stream);
const agent = connection.agent;

async function handle(command) {
  switch (command.op) {
    case "pid":
      return { pid: child.pid };
    case "updates": {
      const updates = pending;
      pending = [];
      return { updates };
    }
    case "audit":
      return { sent, received };
    case "request":
      return { result: (await agent.request(command.method, command.params)) ?? null };
    case "prompt": {
      answers = [...(command.answers ?? [])];
      permissions = [];
      let chunks = 0;
      if (command.cancelAfterChunks) {
        chunkWatch = () => {
          chunks += 1;
          if (chunks === command.cancelAfterChunks) {
            agent.notify("session/cancel", { sessionId: command.params.sessionId });
          }
        };
      }
      try {
        if (command.cancelFirst) {
          // session/cancel right before session/prompt: for nothing, not for that prompt
          agent.notify("session/cancel", { sessionId: command.params.sessionId });
        }
        const prompting = agent.request("session/prompt", command.params);
        if (command.cancelAtOnce) {
          // session/cancel right behind session/prompt
          agent.notify("session/cancel", { sessionId: command.params.sessionId });
        }
        const result = await prompting;
        return { result, permissions };
      } finally {
        chunkWatch = null;
      }
    }
    default:
      throw new Error(`unknown op ${command.op}`);
  }
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const command = JSON.parse(line);
  try {
    out(await handle(command));
  } catch (error) {
    out({ error: { code: error.code ?? null, message: String(error.message ?? error), data: error.data ?? null } });
  }
}
child.stdin.end();
await new Promise((resolve) => child.on("exit", resolve));
