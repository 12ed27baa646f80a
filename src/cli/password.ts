import { UsageError } from './operatorError.js';

/**
 * A new password (`users set-password`, and `org create` / `users add` without the old
 * `--admin-password` / `--password`): standard input's first line, or asked for (twice, not echoed)
 * on a terminal, the prompt on stderr so that `$(...)` still captures only the answer. Not an
 * argument: arguments show in `ps` and in shell history.
 */
export async function readNewPassword(question = 'New password: '): Promise<string> {
  if (!process.stdin.isTTY) return firstLine();
  const first = await promptHidden(question);
  const second = await promptHidden('Again: ');
  if (first !== second) throw new UsageError('the two passwords differ');
  return first;
}

/** More than the longest password (1024 characters of up to 4 bytes): a file piped in by mistake is not held. */
const MAX_LINE_BYTES = 4096;

/**
 * Standard input's first line, read only up to its newline: a pipe that stays open after the
 * password (ssh without -t, `docker compose exec -T`) is not waited on. Leaving the loop early
 * destroys the stream.
 */
async function firstLine(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  let sawNewline = false;
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
    const newline = chunk.indexOf(0x0a);
    const part = newline >= 0 ? chunk.subarray(0, newline) : chunk;
    chunks.push(part);
    size += part.length;
    if (newline >= 0) {
      sawNewline = true;
      break;
    }
    if (size > MAX_LINE_BYTES) break;
  }
  if (size > MAX_LINE_BYTES)
    throw new UsageError(`standard input's first line is longer than ${MAX_LINE_BYTES} bytes: it cannot be a password`);
  if (size === 0 && !sawNewline) {
    throw new UsageError(
      'standard input is not a terminal and held no password: give it as the first line, e.g. printf \'%s\\n\' "$PASSWORD" | orgdata …',
    );
  }
  const line = Buffer.concat(chunks).toString('utf8');
  return line.endsWith('\r') ? line.slice(0, -1) : line;
}

function promptHidden(question: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const input = process.stdin;
    // Echo off before the question shows: what is typed as soon as it shows is not echoed either.
    input.setRawMode(true);
    // Whole characters: a multi-byte one split across two reads is not corrupted.
    input.setEncoding('utf8');
    process.stderr.write(question);
    input.resume();
    let answer = '';
    const done = (error?: Error) => {
      input.setRawMode(false);
      input.pause();
      input.off('data', onData);
      process.stderr.write('\n');
      if (error) reject(error);
      else resolve(answer);
    };
    const onData = (data: string) => {
      for (const char of data) {
        if (char === '\r' || char === '\n' || char === '\u0004') return done();
        if (char === '\u0003') return done(new UsageError('cancelled'));
        if (char === '\u007f' || char === '\b') answer = Array.from(answer).slice(0, -1).join('');
        // An escape sequence (arrow keys, function keys) arrives in one read: none of it is the password.
        else if (char === '\u001b') return;
        else if (char >= ' ') answer += char;
      }
    };
    input.on('data', onData);
  });
}
