/**
 * A daemon's usage error as the one stderr line the command-line contract asks for: the problem (a message that
 * may carry the usage text after it, or span lines) without the usage, which --help prints.
 */
export function usageErrorLine(daemon: string, message: string, usage: string): string {
  const problem = message.replace(`\n${usage}`, '').split('\n').join('; ');
  return `${daemon}: ${problem} (--help prints the usage)\n`;
}
