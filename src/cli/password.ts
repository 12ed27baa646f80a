import { UsageError } from './operatorError.js';

/**
 * A new password (`users set-password`, and `org create` / `users add` without the old
 * `--admin-password` / `--password`): standard input's first line, or asked for (twice, not echoed)
 * on a terminal, the prompt on stderr so that `$(...)` still captures only the answer. Not an
 * argument: arguments show in `ps` and in shell history.
 */
export async function readNewPassword(question = 'New password: '): Promise<string> {
  if (!process.stdin.isTTY) {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    return text.split(/\r?\n/)[0] ?? '';
  }
  const first = await promptHidden(question);
  const second = await promptHidden('Again: ');
  if (first !== second) throw new UsageError('the two passwords differ');
  return first;
}

function promptHidden(question: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const input = process.stdin;
    // Echo off before the question shows: what is typed as soon as it shows is not echoed either.
    input.setRawMode(true);
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
    const onData = (data: Buffer) => {
      for (const char of data.toString('utf8')) {
        if (char === '\r' || char === '\n') return done();
        if (char === '\u0003') return done(new UsageError('cancelled'));
        if (char === '\u007f') answer = answer.slice(0, -1);
        else answer += char;
      }
    };
    input.on('data', onData);
  });
}
