import { CommanderError, type OutputConfiguration } from "commander";
import { CommandFailed, describeFailure } from "./errors.js";
import { buildProgram } from "./program.js";

// Runs one `headroom …` invocation and returns its exit code: 0 done (help included), 1 failed,
// 2 usage or configuration error. Commander has already printed its own usage errors and help.

export async function runCli(argv: string[], output?: OutputConfiguration): Promise<number> {
  const program = buildProgram(output);
  const writeErr = output?.writeErr ?? ((s: string) => process.stderr.write(s));
  try {
    // Bare `headroom` shows the help, as a success.
    await program.parseAsync(argv.length === 0 ? ["--help"] : argv, { from: "user" });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    if (err instanceof CommandFailed) return err.exitCode;
    const failure = describeFailure(err);
    writeErr(`headroom: ${failure.message}\n`);
    return failure.exitCode;
  }
}
