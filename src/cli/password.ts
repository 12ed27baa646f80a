import { UsageError } from './operatorError.js';

/**
 * A new password for `users set-password`: standard input's first line, or asked for (twice, not
 * echoed) on a terminal. Never an argument: arguments show in `ps` and in shell history.
 */
export async function readNewPassword(): Promise<string> {
  if (!process.stdin.isTTY) {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    return text.split(/\r?\n/)[0] ?? '';
  }
  const first = await promptHidden('New password: ');
  const second = await promptHidden('Again: ');
  if (first !== second) throw new UsageError('the two passwords differ');
  return first;
}

function promptHidden(question: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const input = process.stdin;
    process.stderr.write(question);
    input.setRawMode(true);
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
