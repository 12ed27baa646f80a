import { createReadStream } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { OperatorError } from '../operatorError.js';
import { parseJson } from '../../domain/json.js';

/** A row of a table file with the number of its line (from 1), for messages that point at it. */
export interface NumberedRow {
  line: number;
  row: Record<string, unknown>;
}

/**
 * The rows of an export's table file, one at a time, each with its line number; `name` is how a
 * message names the file (`tables/events.jsonl`). A line that is not a JSON object stops the read
 * with `export_invalid` naming the file and the line. The file is pulled a chunk at a time as the
 * rows are used (readline's iterator queues every line the stream emits meanwhile: a slow
 * consumer, such as an import waiting on its database, would end up holding the whole file).
 */
export async function* readRows(file: string, name: string): AsyncIterable<NumberedRow> {
  const decoder = new StringDecoder('utf8');
  let rest = '';
  let line = 0;
  for await (const chunk of createReadStream(file, { highWaterMark: 256 * 1024 })) {
    const lines = (rest + decoder.write(chunk as Buffer)).split('\n');
    rest = lines.pop()!;
    for (const text of lines) {
      line++;
      if (text) yield { line, row: parseRow(text, name, line) };
    }
  }
  rest += decoder.end();
  if (rest) yield { line: line + 1, row: parseRow(rest, name, line + 1) };
}

function parseRow(text: string, name: string, line: number): Record<string, unknown> {
  let value: unknown;
  try {
    value = parseJson(text);
  } catch (error) {
    throw new OperatorError(
      'export_invalid',
      `${name} line ${line}: not valid JSON (${error instanceof Error ? error.message : String(error)})`,
    );
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new OperatorError('export_invalid', `${name} line ${line}: not a JSON object (one row a line)`);
  }
  return value as Record<string, unknown>;
}
