// A step a test file's tests stand on, made once by whichever test needs it first: each test awaits
// the steps it needs, so it passes alone and in any order (`--sequence.shuffle`), and a failed
// step fails every test that needs it, with its own error.
export function once<T>(step: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () => {
    made ??= step();
    return made;
  };
}
