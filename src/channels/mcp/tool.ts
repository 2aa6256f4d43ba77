import type { FastifyBaseLogger } from 'fastify';
import type { CallToolResult, McpServer, ServerContext, StandardSchemaWithJSON, ToolAnnotations } from '@modelcontextprotocol/server';
import type { z } from 'zod';
import { findUnstorableText, parseOrThrow, Problem, unstorableTextProblem } from '../../domain/problems.ts';
import { internalError, logFailure, problemBody, ProblemSchema, storeOutageProblem } from '../problem-reply.ts';

/** Who calls a tool, in which HTTP request: what every tool's work is given. */
export interface ToolCall {
  userId: string;
  /** The HTTP request's id: a problem body names it, as the API's do. */
  requestId: string;
  log: FastifyBaseLogger;
  /** Aborts when the client cancels the call or hangs up. */
  signal: AbortSignal;
  /** Aborts as the server starts closing: a held read ends then, as the API's do (its client asks again, elsewhere or after the restart). */
  shutdown: AbortSignal;
  /** The SDK's context of the call (progress token, notifications). */
  mcp: ServerContext;
}

/** One tool of contract §9.6: its arguments and result as the API's zod schemas give them, and the service call it makes. */
export interface ToolDefinition<Input extends z.ZodType, Output extends z.ZodType> {
  name: string;
  title: string;
  description: string;
  input: Input;
  output: Output;
  annotations: ToolAnnotations;
  /**
   * How the arguments are judged, when not by `input` alone: the bulk tools hand their entries to
   * the service, which judges each on its own (one bad entry fails alone, as on the API).
   */
  parse?: (args: unknown) => z.infer<Input>;
  run(args: z.infer<Input>, call: ToolCall): Promise<z.infer<Output>>;
}

type JsonSchema = Record<string, unknown>;
type StandardProps = StandardSchemaWithJSON['~standard'];
type JsonSchemaConverter = (options: Parameters<StandardProps['jsonSchema']['input']>[0]) => JsonSchema;

/**
 * A schema as `tools/list` shows it, for clients and models: the root inline (not a `$ref` to a
 * named schema), and objects open to fields they do not name (contract §0: extra fields are allowed).
 */
function shown(convert: JsonSchemaConverter): JsonSchemaConverter {
  return (options) => {
    const json = convert(options);
    const defs = json.$defs as Record<string, JsonSchema> | undefined;
    const rootRef = typeof json.$ref === 'string' ? /^#\/\$defs\/(.+)$/.exec(json.$ref)?.[1] : undefined;
    let root = json;
    if (defs && rootRef !== undefined && defs[rootRef]) {
      const { [rootRef]: named, ...others } = defs;
      const { $ref: _ref, $defs: _defs, ...rest } = json;
      root = { ...rest, ...named, ...(Object.keys(others).length > 0 ? { $defs: others } : {}) };
    }
    return openObjects(root) as JsonSchema;
  };
}

/** `additionalProperties: false` dropped, and `{}` (any value, which some clients flag as a mistake) said as `true`. */
function openObjects(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(openObjects);
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value).filter(([key, child]) => !(key === 'additionalProperties' && child === false))
    .map(([key, child]) => [key, key === 'additionalProperties' && isEmptyObject(child) ? true : openObjects(child)]);
  return Object.fromEntries(entries);
}

const isEmptyObject = (value: unknown): boolean => value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 0;

/**
 * An input as the SDK takes it: shown, not checked. The SDK's check would answer a bad argument
 * with its own text, where the contract wants the API's 422 problem body (§9.6), so the tool
 * judges its arguments itself, as the API's route does.
 */
function inputForSdk(input: z.ZodType): StandardSchemaWithJSON {
  const standard = input['~standard'] as unknown as StandardProps;
  return {
    '~standard': {
      version: 1, vendor: standard.vendor, validate: (value: unknown) => ({ value }),
      jsonSchema: { input: shown(standard.jsonSchema.input), output: shown(standard.jsonSchema.output) },
    },
  };
}

/**
 * An output as the SDK takes it: each result is checked against it (by the SDK, before it goes
 * out), and it is shown as "the result, or the problem body of an isError result", since some
 * clients check an error's structured content against the tool's output schema too.
 */
function outputForSdk(output: z.ZodType): StandardSchemaWithJSON {
  const standard = output['~standard'] as unknown as StandardProps;
  const problem = shown((ProblemSchema['~standard'] as unknown as StandardProps).jsonSchema.output);
  const result = shown(standard.jsonSchema.output);
  const either: JsonSchemaConverter = (options) => {
    // Both alternatives' named schemas at the root, where their `#/$defs/…` references point.
    const { $schema, $defs: resultDefs, ...resultSchema } = result(options);
    const { $schema: _dialect, $defs: problemDefs, ...problemSchema } = problem(options);
    const defs = { ...(resultDefs as JsonSchema | undefined), ...(problemDefs as JsonSchema | undefined) };
    return {
      ...(typeof $schema === 'string' ? { $schema } : {}),
      type: 'object',
      anyOf: [resultSchema, { ...problemSchema, description: 'With isError: the problem, as the API answers it (RFC 9457).' }],
      ...(Object.keys(defs).length > 0 ? { $defs: defs } : {}),
    };
  };
  return { '~standard': { version: 1, vendor: standard.vendor, validate: standard.validate, jsonSchema: { input: either, output: either } } };
}

/** A tool result: the value as structured content, and as JSON text for clients that read only text. */
function resultOf(value: unknown, isError: boolean): CallToolResult {
  const result: CallToolResult = { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value as Record<string, unknown> };
  if (isError) result.isError = true;
  return result;
}

/** A failure as the API would answer it: a Problem as it is, an outage as 503, anything else a logged 500 naming no cause. */
function problemOf(error: unknown, call: ToolCall): Problem {
  const problem = error instanceof Problem ? error : storeOutageProblem(error) ?? internalError();
  logFailure(call.log, error, problem, 'unhandled error in an MCP tool');
  return problem;
}

/** Registers `tool` on `server`: every problem (a bad argument included) is an `isError` result whose structured content is the problem body. */
export function registerTool<Input extends z.ZodType, Output extends z.ZodType>(
  server: McpServer, tool: ToolDefinition<Input, Output>, callOf: (mcp: ServerContext) => ToolCall,
): void {
  server.registerTool(tool.name, {
    title: tool.title,
    description: tool.description,
    inputSchema: inputForSdk(tool.input),
    outputSchema: outputForSdk(tool.output),
    annotations: { title: tool.title, ...tool.annotations },
  }, async (args: unknown, mcp: ServerContext) => {
    const call = callOf(mcp);
    try {
      const parsed = tool.parse ? tool.parse(args) : parseArguments(tool.input, args);
      return resultOf(await tool.run(parsed, call), false);
    } catch (error) {
      return resultOf(problemBody(problemOf(error, call), call.requestId), true);
    }
  });
}

/**
 * Arguments judged as the API judges a body: text no database stores (U+0000, a lone surrogate)
 * first, then `before` (a check with codes of its own, as a route's preValidation), then the schema.
 */
export function parseArguments<Input extends z.ZodType>(input: Input, args: unknown, before?: (args: unknown) => void): z.infer<Input> {
  const path = findUnstorableText(args);
  if (path !== null) throw unstorableTextProblem(path);
  before?.(args);
  return parseOrThrow(input, args ?? {}) as z.infer<Input>;
}
