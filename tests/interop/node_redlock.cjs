// node-redlock on the same servers as redlock --raw-key, for the interop
// test in tests/integration/keys.rs. Needs `redlock` and `ioredis` on
// NODE_PATH (npm install redlock@5.0.0-beta.2 ioredis@5).
//
//   node node_redlock.cjs hold KEY TTL_MS PORT...  take the lock, print its
//       value, hold it until a line arrives on stdin, release it, exit 0
//   node node_redlock.cjs try KEY TTL_MS PORT...   one attempt: print
//       "acquired" (and release) and exit 0, or print "busy" and exit 3
const Redis = require("ioredis");
const Redlock = require("redlock").default;

async function main() {
  const [mode, key, ttl, ...ports] = process.argv.slice(2);
  const clients = ports.map((port) => new Redis({ host: "127.0.0.1", port: Number(port) }));
  const redlock = new Redlock(clients, { retryCount: 0 });
  let code = 0;
  try {
    const lock = await redlock.acquire([key], Number(ttl));
    if (mode === "hold") {
      console.log(lock.value);
      await new Promise((resolve) => process.stdin.once("data", resolve));
    } else {
      console.log("acquired");
    }
    await lock.release();
  } catch (e) {
    console.log("busy");
    console.error(String(e));
    code = 3;
  }
  clients.forEach((c) => c.disconnect());
  process.exit(code);
}

main();
