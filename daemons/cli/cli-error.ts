/** A failure the `agn` command reports as one line on stderr with a chosen exit status, never as a stack trace. */
export class CliError extends Error {
  /** 1: the input was read and is wrong (reject, not canonicalizable); 2: usage error or unreadable input. */
  readonly exitCode: 1 | 2;
  constructor(message: string, exitCode: 1 | 2) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

export function usageError(message: string): CliError {
  return new CliError(`${message} (see agn --help)`, 2);
}
