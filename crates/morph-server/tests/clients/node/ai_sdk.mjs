// The AI SDK (Vercel's `ai` with `@ai-sdk/openai`, installed by `npm ci`) against a live Morph
// decoder: `generateObject` with a zod schema (a json_schema response_format) and
// `generateText` with a tool the model must call, over both the Chat Completions and the
// Responses API. Each check asserts the answer's content.
//
// Run by crates/morph-server/tests/server/structured_outputs.rs: node ai_sdk.mjs GENERATE_URL MODEL
import { createOpenAI } from "@ai-sdk/openai";
import { generateObject, generateText, tool } from "ai";
import { z } from "zod";

const [url, model] = process.argv.slice(2);
const provider = createOpenAI({ baseURL: `${url}/v1`, apiKey: "not-checked" });

function check(name, ok, detail = "") {
  if (!ok) {
    console.error(`FAILED ${name}: ${JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok  ${name}`);
}

const City = z.object({ name: z.string().max(40), country: z.string().max(40), population: z.number().int(), coastal: z.boolean() });
const weather = tool({
  description: "The current weather in a city",
  inputSchema: z.object({ city: z.string().max(30), unit: z.enum(["celsius", "fahrenheit"]) }),
  execute: async ({ city, unit }) => `18 degrees ${unit} in ${city}`,
});

for (const [api, chosen] of [["chat", provider.chat(model)], ["responses", provider.responses(model)]]) {
  const { object } = await generateObject({ model: chosen, schema: City, prompt: "Describe Lisbon as a city record.", maxOutputTokens: 200, temperature: 0 });
  check(`AI SDK generateObject (${api}) gives an object of the schema`, City.safeParse(object).success, object);
  const called = await generateText({
    model: chosen,
    tools: { weather },
    toolChoice: "required",
    prompt: "What is the weather in Paris, in celsius?",
    maxOutputTokens: 200,
    temperature: 0,
  });
  const calls = called.toolCalls;
  const seen = { calls, finishReason: called.finishReason, content: called.content };
  check(`AI SDK generateText (${api}) calls the tool with valid input`, calls.length >= 1 && calls.every((c) => c.toolName === "weather" && weather.inputSchema.safeParse(c.input).success), seen);
  check(`AI SDK (${api}) ran the tool on the call`, called.toolResults.length === calls.length && String(called.toolResults[0].output).includes("degrees"), called.toolResults);
}
console.log("all client checks passed");
