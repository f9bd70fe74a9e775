// The openai npm package against live Morph servers, as a Node user calls it: embeddings (its
// default base64 and float), chat whole and through the `chat.completions.stream()` helper
// (which throws without the first chunk's role), and `responses.create` whole and streamed.
//
// Run by tests/server/client_sdks.rs: node openai_node.mjs EMBED_URL EMBED_MODEL GENERATE_URL GENERATE_MODEL
// Exits non-zero with the failed check; prints one line per check.

import OpenAI from "openai";

const [embedUrl, embedModel, generateUrl, generateModel] = process.argv.slice(2);
const question = "Count from 1 to 20, separated by commas.";

function check(name, ok, detail = "") {
  if (!ok) {
    throw new Error(`${name}: ${JSON.stringify(detail)}`);
  }
  console.log(`ok  ${name}`);
}

const embedder = new OpenAI({ baseURL: `${embedUrl}/v1`, apiKey: "not-checked" });
const base64 = await embedder.embeddings.create({ model: embedModel, input: ["a", "b"] });
const floats = await embedder.embeddings.create({ model: embedModel, input: ["a", "b"], encoding_format: "float" });
const same = base64.data.every((d, i) => d.embedding.every((x, j) => Math.abs(x - floats.data[i].embedding[j]) < 1e-6));
check("embeddings: the default (base64) and float give the same vectors", base64.data.length === 2 && base64.data[0].embedding.length === 384 && same);

const client = new OpenAI({ baseURL: `${generateUrl}/v1`, apiKey: "not-checked" });
const chat = { model: generateModel, messages: [{ role: "user", content: question }], temperature: 0, max_completion_tokens: 30 };
const whole = await client.chat.completions.create(chat);
const answer = whole.choices[0].message.content;
check("chat answers", answer.length > 0 && whole.id.startsWith("chatcmpl-"), whole.id);
const final = await client.chat.completions.stream(chat).finalChatCompletion();
check("chat.completions.stream() builds the message with its role", final.choices[0].message.role === "assistant" && final.choices[0].message.content === answer, final.choices[0].message);

const response = await client.responses.create({ model: generateModel, input: question, temperature: 0, max_output_tokens: 30 });
check("responses.create gives the chat's answer", response.output_text === answer && response.usage.output_tokens === whole.usage.completion_tokens, response.output_text);
const events = [];
for await (const event of await client.responses.create({ model: generateModel, input: question, temperature: 0, max_output_tokens: 30, stream: true })) {
  events.push(event);
}
const deltas = events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("");
check("a streamed response: created first, completed last, its deltas the answer", events[0].type === "response.created" && events.at(-1).type === "response.completed" && deltas === answer, events.map((e) => e.type).slice(0, 5));
const streamed = await client.responses.stream({ model: generateModel, input: question, temperature: 0, max_output_tokens: 30 }).finalResponse();
check("responses.stream() builds the same response", streamed.output_text === answer, streamed.output_text);
console.log("all client checks passed");
