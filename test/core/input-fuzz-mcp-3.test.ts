import t from 'tap';
import { fuzzingApp } from '../helpers/input-fuzz-app.ts';

// Input fuzzing (test/helpers/input-fuzz-app.ts): the tools at /mcp in shard 3.
const fuzzing = await fuzzingApp(t);
t.test('every tool at /mcp in mcp shard 3', async (t) => fuzzing.fuzzMcp(t, 3));
