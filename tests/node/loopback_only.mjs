// Preloaded with `node --import ./loopback_only.mjs SCRIPT`: a TCP server that listens without
// naming a host (Node's default is every interface, `::` and `0.0.0.0`) listens on 127.0.0.1
// instead. For peers such as @modelcontextprotocol/server-everything, whose Streamable HTTP
// transport calls `app.listen(PORT)` and has no option for the address: the tests use loopback
// only. A server that names its host, or listens on a path (a Unix socket), is left alone.
import net from "node:net";

const LOOPBACK = "127.0.0.1";
const listen = net.Server.prototype.listen;

net.Server.prototype.listen = function (...args) {
  const [first, second] = args;
  const isPort =
    typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first));
  if (args.length === 0 || typeof first === "function") {
    args.unshift(0, LOOPBACK);
  } else if (isPort && typeof second !== "string") {
    args.splice(1, 0, LOOPBACK);
  } else if (
    first !== null &&
    typeof first === "object" &&
    first.path === undefined &&
    first.fd === undefined &&
    first.handle === undefined &&
    first._handle === undefined &&
    first.host === undefined
  ) {
    args[0] = { ...first, host: LOOPBACK };
  }
  return listen.apply(this, args);
};
