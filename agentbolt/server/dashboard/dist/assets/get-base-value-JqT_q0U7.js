function e(t){return typeof t=="object"&&t!==null?"base"in t?t.base:void 0:t}export{e as g};
